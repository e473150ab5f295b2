package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Writer builds a GGUF v3 file: metadata in Set order, tensors in AddTensor
// order, each tensor's data padded to the alignment as llama.cpp expects.
// Errors from Set/AddTensor are kept and returned by WriteTo.
type Writer struct {
	keys    []string
	values  map[string]any // scalars or *array
	tensors []writerTensor
	names   map[string]bool
	err     error
}

type writerTensor struct {
	info TensorInfo
	data []byte
	emit func(io.Writer) error // instead of data, for streamed tensors
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{values: map[string]any{}, names: map[string]bool{}}
}

func (w *Writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: "+format, append([]any{ErrWriter}, args...)...)
	}
}

// Set stores a metadata value, replacing an earlier value of the same key
// in place. Supported: string, bool, uint8 … int64, float32, float64 (int is
// stored as int64), slices of those, and []any whose elements all share one
// of those types (nested []any gives nested arrays). llama.cpp reads most
// integer keys as uint32, so pass uint32 explicitly for those.
func (w *Writer) Set(key string, value any) {
	v, err := normalize(value, 0)
	if err != nil {
		w.fail("key %q: %v", key, err)
		return
	}
	if key == "general.alignment" {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 || a > maxAlignment {
			w.fail("general.alignment must be a uint32 power of two, got %T %v", value, value)
			return
		}
	}
	if _, exists := w.values[key]; !exists {
		w.keys = append(w.keys, key)
	}
	w.values[key] = v
}

// CopyValue copies key from f with its exact stored type (including the
// element type of empty arrays). It reports whether f has the key.
func (w *Writer) CopyValue(f *File, key string) bool {
	v, ok := f.values[key]
	if !ok {
		return false
	}
	if _, exists := w.values[key]; !exists {
		w.keys = append(w.keys, key)
	}
	w.values[key] = v // values are never mutated, sharing is safe
	return true
}

// AddTensor appends a tensor. data is retained (not copied) until WriteTo
// and must be exactly TensorInfo.Bytes() long.
func (w *Writer) AddTensor(name string, typ Type, dims []uint64, data []byte) {
	w.addTensor(name, typ, dims, data, nil)
}

// AddTensorFunc appends a tensor whose data emit writes during WriteTo
// (exactly TensorInfo.Bytes() bytes, e.g. row by row), so a large model is
// never held in memory. emit may be called once per WriteTo.
func (w *Writer) AddTensorFunc(name string, typ Type, dims []uint64, emit func(out io.Writer) error) {
	w.addTensor(name, typ, dims, nil, emit)
}

func (w *Writer) addTensor(name string, typ Type, dims []uint64, data []byte, emit func(io.Writer) error) {
	ti := TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ}
	switch {
	case w.names[name]:
		w.fail("tensor %q added twice", name)
	case !typ.Known():
		w.fail("tensor %q: %v %d", name, ErrUnknownType, uint32(typ))
	case len(dims) > maxDims:
		w.fail("tensor %q has %d dims (max %d)", name, len(dims), maxDims)
	case len(dims) > 0 && dims[0]%uint64(typ.BlockSize()) != 0:
		w.fail("tensor %q row length %d is not a multiple of the %s block size %d", name, dims[0], typ, typ.BlockSize())
	case emit == nil && uint64(len(data)) != ti.Bytes():
		w.fail("tensor %q has %d bytes of data, its shape %v %s needs %d", name, len(data), dims, typ, ti.Bytes())
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{info: ti, data: data, emit: emit})
}

func (w *Writer) alignment() uint64 {
	// CopyValue may bring an alignment of another integer type; the reader validated it.
	if a, ok := toUint(w.values["general.alignment"]); ok && a != 0 && a&(a-1) == 0 && a <= maxAlignment {
		return a
	}
	return DefaultAlignment
}

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	align := w.alignment()
	offsets := make([]uint64, len(w.tensors))
	var off uint64
	for i, t := range w.tensors {
		offsets[i] = off
		off = alignUp(off+t.info.Bytes(), align)
	}

	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := &encoder{w: cw}
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.keys)))
	for _, k := range w.keys {
		v := w.values[k]
		e.str(k)
		e.u32(uint32(typeOf(v)))
		e.value(v)
	}
	for i, t := range w.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Dims)))
		for _, d := range t.info.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.info.Type))
		e.u64(offsets[i])
	}
	e.pad(align)
	for _, t := range w.tensors {
		if t.emit == nil {
			e.bytes(t.data)
		} else if e.err == nil {
			before := cw.n
			if err := t.emit(cw); err != nil {
				e.err = fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			} else if got := uint64(cw.n - before); got != t.info.Bytes() {
				e.err = fmt.Errorf("%w: tensor %q emitted %d bytes, its shape needs %d", ErrWriter, t.info.Name, got, t.info.Bytes())
			}
		}
		e.pad(align)
	}
	if e.err == nil {
		e.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, e.err
}

// WriteFile writes the file to path (via a temporary file renamed into place).
func (w *Writer) WriteFile(path string) error {
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	_, err = w.WriteTo(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type encoder struct {
	w   *countingWriter
	buf [8]byte
	err error
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.bytes(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.bytes(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.bytes(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.bytes(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

var zeros [256]byte

func (e *encoder) pad(align uint64) {
	n := alignUp(uint64(e.w.n), align) - uint64(e.w.n)
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		e.bytes(zeros[:k])
		n -= k
	}
}

func (e *encoder) value(v any) {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	case *array:
		e.u32(uint32(x.elem))
		e.u64(uint64(x.len()))
		switch s := x.items.(type) {
		case []uint8:
			e.bytes(s)
		case []int8:
			for _, v := range s {
				e.u8(uint8(v))
			}
		case []bool:
			for _, v := range s {
				e.value(v)
			}
		case []uint16:
			for _, v := range s {
				e.u16(v)
			}
		case []int16:
			for _, v := range s {
				e.u16(uint16(v))
			}
		case []uint32:
			for _, v := range s {
				e.u32(v)
			}
		case []int32:
			for _, v := range s {
				e.u32(uint32(v))
			}
		case []float32:
			for _, v := range s {
				e.u32(math.Float32bits(v))
			}
		case []uint64:
			for _, v := range s {
				e.u64(v)
			}
		case []int64:
			for _, v := range s {
				e.u64(uint64(v))
			}
		case []float64:
			for _, v := range s {
				e.u64(math.Float64bits(v))
			}
		case []string:
			for _, v := range s {
				e.str(v)
			}
		case []*array:
			for _, v := range s {
				e.value(v)
			}
		}
	}
}

func typeOf(v any) ValueType {
	if _, ok := v.(*array); ok {
		return ValueArray
	}
	return scalarType(v)
}

// normalize converts a value given to Set into the stored representation.
func normalize(value any, depth int) (any, error) {
	if depth > maxArrayDepth {
		return nil, fmt.Errorf("arrays nested deeper than %d", maxArrayDepth)
	}
	switch v := value.(type) {
	case uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, string:
		return v, nil
	case int:
		return int64(v), nil
	case uint:
		return uint64(v), nil
	case []uint8:
		return &array{ValueUint8, append([]uint8(nil), v...)}, nil
	case []int8:
		return &array{ValueInt8, append([]int8(nil), v...)}, nil
	case []uint16:
		return &array{ValueUint16, append([]uint16(nil), v...)}, nil
	case []int16:
		return &array{ValueInt16, append([]int16(nil), v...)}, nil
	case []uint32:
		return &array{ValueUint32, append([]uint32(nil), v...)}, nil
	case []int32:
		return &array{ValueInt32, append([]int32(nil), v...)}, nil
	case []uint64:
		return &array{ValueUint64, append([]uint64(nil), v...)}, nil
	case []int64:
		return &array{ValueInt64, append([]int64(nil), v...)}, nil
	case []int:
		s := make([]int64, len(v))
		for i, x := range v {
			s[i] = int64(x)
		}
		return &array{ValueInt64, s}, nil
	case []float32:
		return &array{ValueFloat32, append([]float32(nil), v...)}, nil
	case []float64:
		return &array{ValueFloat64, append([]float64(nil), v...)}, nil
	case []bool:
		return &array{ValueBool, append([]bool(nil), v...)}, nil
	case []string:
		return &array{ValueString, append([]string(nil), v...)}, nil
	case []any:
		return normalizeAnySlice(v, depth)
	}
	return nil, fmt.Errorf("unsupported value type %T", value)
}

// normalizeAnySlice infers the element type from the elements; an empty
// []any becomes an empty uint8 array (use CopyValue to keep another type).
func normalizeAnySlice(v []any, depth int) (any, error) {
	if len(v) == 0 {
		return &array{ValueUint8, []uint8{}}, nil
	}
	first, err := normalize(v[0], depth+1)
	if err != nil {
		return nil, err
	}
	elem := typeOf(first)
	norm := make([]any, len(v))
	norm[0] = first
	for i := 1; i < len(v); i++ {
		if norm[i], err = normalize(v[i], depth+1); err != nil {
			return nil, err
		}
		if typeOf(norm[i]) != elem {
			return nil, fmt.Errorf("mixed array: element 0 is %s, element %d is %s", elem, i, typeOf(norm[i]))
		}
	}
	a := &array{elem: elem}
	switch elem {
	case ValueArray:
		s := make([]*array, len(v))
		for i, x := range norm {
			s[i] = x.(*array)
		}
		a.items = s
	default:
		a.items = typedSlice(elem, norm)
	}
	return a, nil
}

func typedSlice(elem ValueType, norm []any) any {
	switch elem {
	case ValueUint8:
		return collect[uint8](norm)
	case ValueInt8:
		return collect[int8](norm)
	case ValueUint16:
		return collect[uint16](norm)
	case ValueInt16:
		return collect[int16](norm)
	case ValueUint32:
		return collect[uint32](norm)
	case ValueInt32:
		return collect[int32](norm)
	case ValueUint64:
		return collect[uint64](norm)
	case ValueInt64:
		return collect[int64](norm)
	case ValueFloat32:
		return collect[float32](norm)
	case ValueFloat64:
		return collect[float64](norm)
	case ValueBool:
		return collect[bool](norm)
	case ValueString:
		return collect[string](norm)
	}
	return nil
}

func collect[T any](norm []any) []T {
	s := make([]T, len(norm))
	for i, x := range norm {
		s[i] = x.(T)
	}
	return s
}
