// Package gguf reads and writes GGUF files (the llama.cpp model format,
// versions 2 and 3, little-endian). Reading memory-maps the file so tensor
// data is never copied; every count and length is checked against the bytes
// that remain before anything is allocated, so hostile files fail cleanly.
package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

const (
	magic = 0x46554747 // "GGUF" little-endian

	// DefaultAlignment is used when general.alignment is absent.
	DefaultAlignment = 32
	// maxDims is GGML_MAX_DIMS.
	maxDims = 4
	// maxArrayDepth bounds nested arrays; real files nest at most once.
	maxArrayDepth = 8
	// maxAlignment bounds general.alignment so padding stays sane.
	maxAlignment = 1 << 20
)

// File is a parsed GGUF file. Tensor data stays in the mapping (or the
// buffer given to Parse) and is valid until Close.
type File struct {
	Version uint32
	// Tensors in file order.
	Tensors []TensorInfo
	// Alignment of the tensor data section (general.alignment or 32).
	Alignment uint64
	// DataOffset is where the tensor data section starts in the file.
	DataOffset uint64

	keys    []string
	values  map[string]any // scalars as Go values, arrays as *array
	tensors map[string]int // name → index in Tensors
	data    []byte         // whole file
	unmap   func() error
}

// array keeps a metadata array as a typed slice: []uint8 … []float64,
// []bool, []string, or []*array for nested arrays.
type array struct {
	elem  ValueType
	items any
}

func (a *array) len() int {
	switch s := a.items.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float32:
		return len(s)
	case []float64:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []*array:
		return len(s)
	}
	return 0
}

// toAny converts to []any of Go values (nested arrays become []any).
func (a *array) toAny() []any {
	out := make([]any, 0, a.len())
	switch s := a.items.(type) {
	case []uint8:
		for _, v := range s {
			out = append(out, v)
		}
	case []int8:
		for _, v := range s {
			out = append(out, v)
		}
	case []uint16:
		for _, v := range s {
			out = append(out, v)
		}
	case []int16:
		for _, v := range s {
			out = append(out, v)
		}
	case []uint32:
		for _, v := range s {
			out = append(out, v)
		}
	case []int32:
		for _, v := range s {
			out = append(out, v)
		}
	case []uint64:
		for _, v := range s {
			out = append(out, v)
		}
	case []int64:
		for _, v := range s {
			out = append(out, v)
		}
	case []float32:
		for _, v := range s {
			out = append(out, v)
		}
	case []float64:
		for _, v := range s {
			out = append(out, v)
		}
	case []bool:
		for _, v := range s {
			out = append(out, v)
		}
	case []string:
		for _, v := range s {
			out = append(out, v)
		}
	case []*array:
		for _, v := range s {
			out = append(out, v.toAny())
		}
	}
	return out
}

// Parse reads a GGUF file held in data. The File refers to data (no copy).
func Parse(data []byte) (*File, error) {
	r := &reader{data: data}
	f := &File{data: data, values: map[string]any{}, tensors: map[string]int{}}
	if err := f.parse(r); err != nil {
		return nil, err
	}
	return f, nil
}

type reader struct {
	data []byte
	off  uint64
}

func (r *reader) remaining() uint64 { return uint64(len(r.data)) - r.off }

func (r *reader) need(n uint64, what string) error {
	if r.remaining() < n {
		return fmt.Errorf("%w: %s needs %d bytes at offset %d, %d left", ErrTruncated, what, n, r.off, r.remaining())
	}
	return nil
}

func (r *reader) u8(what string) (uint8, error) {
	if err := r.need(1, what); err != nil {
		return 0, err
	}
	v := r.data[r.off]
	r.off++
	return v, nil
}

func (r *reader) u16(what string) (uint16, error) {
	if err := r.need(2, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(r.data[r.off:])
	r.off += 2
	return v, nil
}

func (r *reader) u32(what string) (uint32, error) {
	if err := r.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.data[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) u64(what string) (uint64, error) {
	if err := r.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.data[r.off:])
	r.off += 8
	return v, nil
}

func (r *reader) str(what string) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > r.remaining() {
		return "", fmt.Errorf("%w: %s length %d at offset %d exceeds the %d bytes left", ErrTruncated, what, n, r.off-8, r.remaining())
	}
	s := string(r.data[r.off : r.off+n])
	r.off += n
	return s, nil
}

func (f *File) parse(r *reader) error {
	m, err := r.u32("magic")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadMagic, err)
	}
	if m != magic {
		return fmt.Errorf("%w: got %q", ErrBadMagic, r.data[:4])
	}
	v, err := r.u32("version")
	if err != nil {
		return err
	}
	switch {
	case v == 2 || v == 3:
	case v == 1:
		return fmt.Errorf("%w: version 1 (re-convert the model with a current llama.cpp)", ErrVersion)
	case bits.ReverseBytes32(v) == 2 || bits.ReverseBytes32(v) == 3:
		return fmt.Errorf("%w: big-endian file (version %d)", ErrVersion, bits.ReverseBytes32(v))
	default:
		return fmt.Errorf("%w: version %d (want 2 or 3)", ErrVersion, v)
	}
	f.Version = v
	// v2 and v3 share the little-endian layout; v3 only added the
	// big-endian variant, refused above.
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return err
	}
	// Bound counts by the smallest possible encoding of each entry.
	if nKV > r.remaining()/13 {
		return fmt.Errorf("%w: %w: %d metadata entries cannot fit in %d bytes", ErrLimit, ErrTruncated, nKV, r.remaining())
	}
	f.keys = make([]string, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str(fmt.Sprintf("metadata key %d", i))
		if err != nil {
			return err
		}
		if _, dup := f.values[key]; dup {
			return fmt.Errorf("%w: metadata key %q appears twice", ErrDuplicate, key)
		}
		vt, err := r.u32(fmt.Sprintf("type of %q", key))
		if err != nil {
			return err
		}
		val, err := r.value(ValueType(vt), key, 0)
		if err != nil {
			return err
		}
		f.keys = append(f.keys, key)
		f.values[key] = val
	}

	f.Alignment = DefaultAlignment
	if av, ok := f.values["general.alignment"]; ok {
		a, isInt := toUint(av)
		if !isInt || a == 0 || a&(a-1) != 0 || a > maxAlignment {
			return fmt.Errorf("%w: general.alignment %v is not a power of two up to %d", ErrMisaligned, av, maxAlignment)
		}
		f.Alignment = a
	}

	// name(8) + n_dims(4) + type(4) + offset(8)
	if nTensors > r.remaining()/24 {
		return fmt.Errorf("%w: %w: %d tensors cannot fit in %d bytes", ErrLimit, ErrTruncated, nTensors, r.remaining())
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		ti, err := r.tensorInfo(i)
		if err != nil {
			return err
		}
		if _, dup := f.tensors[ti.Name]; dup {
			return fmt.Errorf("%w: tensor %q appears twice", ErrDuplicate, ti.Name)
		}
		if ti.Offset%f.Alignment != 0 {
			return fmt.Errorf("%w: tensor %q offset %d is not a multiple of %d", ErrMisaligned, ti.Name, ti.Offset, f.Alignment)
		}
		f.tensors[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	f.DataOffset = alignUp(r.off, f.Alignment)
	fileLen := uint64(len(r.data))
	for _, ti := range f.Tensors {
		size := ti.Bytes()
		start := f.DataOffset + ti.Offset
		if start < f.DataOffset || start+size < start || start+size > fileLen {
			return fmt.Errorf("%w: tensor %q data [%d, %d+%d) runs past the end of the file (%d bytes)",
				ErrTruncated, ti.Name, f.DataOffset+ti.Offset, f.DataOffset+ti.Offset, size, fileLen)
		}
	}
	return nil
}

func (r *reader) tensorInfo(i uint64) (TensorInfo, error) {
	name, err := r.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return TensorInfo{}, err
	}
	nd, err := r.u32(fmt.Sprintf("tensor %q n_dims", name))
	if err != nil {
		return TensorInfo{}, err
	}
	if nd > maxDims {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has %d dims (max %d)", ErrShape, name, nd, maxDims)
	}
	ti := TensorInfo{Name: name, Dims: make([]uint64, nd)}
	elems := uint64(1)
	for d := range ti.Dims {
		n, err := r.u64(fmt.Sprintf("tensor %q dim %d", name, d))
		if err != nil {
			return TensorInfo{}, err
		}
		if n > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("%w: tensor %q dim %d is %d", ErrShape, name, d, n)
		}
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("%w: tensor %q has too many elements", ErrShape, name)
		}
		elems = lo
		ti.Dims[d] = n
	}
	typ, err := r.u32(fmt.Sprintf("tensor %q type", name))
	if err != nil {
		return TensorInfo{}, err
	}
	ti.Type = Type(typ)
	if !ti.Type.Known() {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has type %d", ErrUnknownType, name, typ)
	}
	if bs := uint64(ti.Type.BlockSize()); nd > 0 && ti.Dims[0]%bs != 0 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q row length %d is not a multiple of the %s block size %d",
			ErrShape, name, ti.Dims[0], ti.Type, bs)
	}
	// Its size in bytes must fit too (an F32 tensor of 2^62 elements is
	// 2^64 bytes, which used to wrap to 0 and pass the file-size check).
	if hi, lo := bits.Mul64(elems/uint64(ti.Type.BlockSize()), uint64(ti.Type.BlockBytes())); hi != 0 || lo > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q of %d elements is more than 2^63 bytes", ErrShape, name, elems)
	}
	if ti.Offset, err = r.u64(fmt.Sprintf("tensor %q offset", name)); err != nil {
		return TensorInfo{}, err
	}
	return ti, nil
}

// value reads one metadata value of type vt.
func (r *reader) value(vt ValueType, key string, depth int) (any, error) {
	what := "value of " + key
	switch vt {
	case ValueUint8:
		return r.u8(what)
	case ValueInt8:
		v, err := r.u8(what)
		return int8(v), err
	case ValueBool:
		v, err := r.u8(what)
		return v != 0, err
	case ValueUint16:
		return r.u16(what)
	case ValueInt16:
		v, err := r.u16(what)
		return int16(v), err
	case ValueUint32:
		return r.u32(what)
	case ValueInt32:
		v, err := r.u32(what)
		return int32(v), err
	case ValueFloat32:
		v, err := r.u32(what)
		return math.Float32frombits(v), err
	case ValueUint64:
		return r.u64(what)
	case ValueInt64:
		v, err := r.u64(what)
		return int64(v), err
	case ValueFloat64:
		v, err := r.u64(what)
		return math.Float64frombits(v), err
	case ValueString:
		return r.str(what)
	case ValueArray:
		return r.array(key, depth)
	}
	return nil, fmt.Errorf("%w: %d for key %q", ErrValueType, uint32(vt), key)
}

func (r *reader) array(key string, depth int) (*array, error) {
	if depth >= maxArrayDepth {
		return nil, fmt.Errorf("%w: arrays nested deeper than %d in %q", ErrLimit, maxArrayDepth, key)
	}
	et, err := r.u32("array type of " + key)
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	n, err := r.u64("array length of " + key)
	if err != nil {
		return nil, err
	}
	minSize := uint64(elem.minSize())
	if minSize == 0 {
		return nil, fmt.Errorf("%w: %d for array elements of %q", ErrValueType, et, key)
	}
	if n > r.remaining()/minSize {
		return nil, fmt.Errorf("%w: %w: array %q claims %d %s elements but only %d bytes are left",
			ErrLimit, ErrTruncated, key, n, elem, r.remaining())
	}
	a := &array{elem: elem}
	if fs := elem.fixedSize(); fs > 0 {
		b := r.data[r.off : r.off+n*uint64(fs)]
		r.off += n * uint64(fs)
		a.items = decodeFixed(elem, b, int(n))
		return a, nil
	}
	switch elem {
	case ValueString:
		s := make([]string, n)
		for i := range s {
			if s[i], err = r.str(key); err != nil {
				return nil, err
			}
		}
		a.items = s
	case ValueArray:
		s := make([]*array, n)
		for i := range s {
			if s[i], err = r.array(key, depth+1); err != nil {
				return nil, err
			}
		}
		a.items = s
	}
	return a, nil
}

func decodeFixed(vt ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch vt {
	case ValueUint8:
		return append([]uint8(nil), b...)
	case ValueInt8:
		s := make([]int8, n)
		for i := range s {
			s[i] = int8(b[i])
		}
		return s
	case ValueBool:
		s := make([]bool, n)
		for i := range s {
			s[i] = b[i] != 0
		}
		return s
	case ValueUint16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = le.Uint16(b[2*i:])
		}
		return s
	case ValueInt16:
		s := make([]int16, n)
		for i := range s {
			s[i] = int16(le.Uint16(b[2*i:]))
		}
		return s
	case ValueUint32:
		s := make([]uint32, n)
		for i := range s {
			s[i] = le.Uint32(b[4*i:])
		}
		return s
	case ValueInt32:
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(le.Uint32(b[4*i:]))
		}
		return s
	case ValueFloat32:
		s := make([]float32, n)
		for i := range s {
			s[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return s
	case ValueUint64:
		s := make([]uint64, n)
		for i := range s {
			s[i] = le.Uint64(b[8*i:])
		}
		return s
	case ValueInt64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(le.Uint64(b[8*i:]))
		}
		return s
	case ValueFloat64:
		s := make([]float64, n)
		for i := range s {
			s[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return s
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// Close releases the mapping. Idempotent. Tensor bytes must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap = nil
	f.data = nil
	return unmap()
}

// Keys returns the metadata keys in file order.
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Value returns a metadata value as a Go value: uint8 … int64, float32,
// float64, bool, string, or []any for arrays (nested arrays as []any).
func (f *File) Value(key string) (any, bool) {
	v, ok := f.values[key]
	if !ok {
		return nil, false
	}
	if a, isArr := v.(*array); isArr {
		return a.toAny(), true
	}
	return v, true
}

// ValueType returns the stored type of a metadata value and, for arrays,
// the element type.
func (f *File) ValueType(key string) (typ, elem ValueType, ok bool) {
	v, ok := f.values[key]
	if !ok {
		return 0, 0, false
	}
	if a, isArr := v.(*array); isArr {
		return ValueArray, a.elem, true
	}
	return scalarType(v), 0, true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.values[key].(string)
	return s, ok
}

// Uint returns an integer value of any integer type; false for negative values.
func (f *File) Uint(key string) (uint64, bool) { return toUint(f.values[key]) }

// Float returns a float or integer value as float64.
func (f *File) Float(key string) (float64, bool) {
	switch v := f.values[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := toInt(f.values[key]); ok {
		return float64(i), true
	}
	if u, ok := toUint(f.values[key]); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.values[key].(bool)
	return b, ok
}

// Strings returns a string array (a copy of the slice header's contents).
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.values[key].(*array)
	if !ok {
		return nil, false
	}
	s, ok := a.items.([]string)
	if !ok {
		return nil, false
	}
	return append([]string(nil), s...), true
}

// Float32s returns a float or integer array as float32s.
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.values[key].(*array)
	if !ok {
		return nil, false
	}
	switch s := a.items.(type) {
	case []float32:
		return append([]float32(nil), s...), true
	case []float64:
		out := make([]float32, len(s))
		for i, v := range s {
			out[i] = float32(v)
		}
		return out, true
	}
	ints, ok := intsOf(a)
	if !ok {
		return nil, false
	}
	out := make([]float32, len(ints))
	for i, v := range ints {
		out[i] = float32(v)
	}
	return out, true
}

// Int32s returns an array of any integer type as int32s (values are
// truncated to 32 bits, so uint32 0xFFFFFFFF reads as -1).
func (f *File) Int32s(key string) ([]int32, bool) {
	a, ok := f.values[key].(*array)
	if !ok {
		return nil, false
	}
	if s, isI32 := a.items.([]int32); isI32 {
		return append([]int32(nil), s...), true
	}
	ints, ok := intsOf(a)
	if !ok {
		return nil, false
	}
	out := make([]int32, len(ints))
	for i, v := range ints {
		out[i] = int32(v)
	}
	return out, true
}

// Tensor returns a tensor's info and its raw bytes inside the mapping.
func (f *File) Tensor(name string) (TensorInfo, []byte, bool) {
	i, ok := f.tensors[name]
	if !ok || f.data == nil {
		return TensorInfo{}, nil, false
	}
	ti := f.Tensors[i]
	start := f.DataOffset + ti.Offset
	return ti, f.data[start : start+ti.Bytes() : start+ti.Bytes()], true
}

func intsOf(a *array) ([]int64, bool) {
	var out []int64
	switch s := a.items.(type) {
	case []uint8:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []int8:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []uint16:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []int16:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []uint32:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []int32:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []uint64:
		out = make([]int64, len(s))
		for i, v := range s {
			out[i] = int64(v)
		}
	case []int64:
		out = append([]int64(nil), s...)
	default:
		return nil, false
	}
	return out, true
}

func toUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := toInt(v); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

func scalarType(v any) ValueType {
	switch v.(type) {
	case uint8:
		return ValueUint8
	case int8:
		return ValueInt8
	case uint16:
		return ValueUint16
	case int16:
		return ValueInt16
	case uint32:
		return ValueUint32
	case int32:
		return ValueInt32
	case float32:
		return ValueFloat32
	case bool:
		return ValueBool
	case string:
		return ValueString
	case uint64:
		return ValueUint64
	case int64:
		return ValueInt64
	case float64:
		return ValueFloat64
	}
	return ValueArray
}
