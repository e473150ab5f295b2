// Package quant converts GGUF models between weight formats the way llama-quantize does for the
// types voxpipe's engine runs: Q8_0, Q4_0, F16 and F32.
package quant

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// FileType is llama.cpp's general.file_type (enum llama_ftype) for a model whose weights are
// mostly typ; ok is false for types QuantizeFile cannot produce.
func FileType(typ gguf.Type) (ftype uint32, ok bool) {
	switch typ {
	case gguf.TypeF32:
		return 0, true
	case gguf.TypeF16:
		return 1, true
	case gguf.TypeQ4_0:
		return 2, true
	case gguf.TypeQ8_0:
		return 7, true
	}
	return 0, false
}

// QuantizeFile reads the GGUF model in (F32 or F16 weights) and writes out with its 2-D weight
// tensors converted to typ, as llama-quantize does:
//   - only tensors named *weight with two or more dimensions are converted;
//   - 1-D tensors (norms, biases) are stored F32;
//   - for Q8_0/Q4_0, tensors whose row length is not a multiple of 32 stay F32;
//   - for Q4_0, token_embd.weight and output.weight are Q8_0 (the anchor files' choice: quality
//     of the embeddings and the output head matters most, and llama.cpp's Q6_K is not supported);
//   - every metadata key is copied in order, general.file_type is set (7 Q8_0, 2 Q4_0, 1 F16,
//     0 F32) and general.quantization_version = 2 is added for quantized outputs.
//
// Weights are quantized with ggml's reference quantizers (quantize_row_q8_0_ref /
// quantize_row_q4_0_ref), which is what llama-quantize uses, so the output bytes match
// llama.cpp's. Tensors are streamed a row at a time: memory stays at one row plus the mapping
// of the input.
func QuantizeFile(in, out string, typ gguf.Type) error {
	ftype, ok := FileType(typ)
	if !ok {
		return fmt.Errorf("quant: target %s: %w", typ, ErrTargetType)
	}
	f, err := gguf.Open(in)
	if err != nil {
		return fmt.Errorf("quant: open %s: %w", in, err)
	}
	defer f.Close()

	meta := gguf.NewWriter()
	for _, k := range f.Keys() {
		meta.CopyValue(f, k)
	}
	meta.Set("general.file_type", ftype)
	if typ == gguf.TypeQ8_0 || typ == gguf.TypeQ4_0 {
		meta.Set("general.quantization_version", uint32(2))
	}

	tensors := make([]StreamTensor, 0, len(f.Tensors))
	for _, ti := range f.Tensors {
		_, data, ok := f.Tensor(ti.Name)
		if !ok {
			return fmt.Errorf("quant: %s: tensor %s has no data", in, ti.Name)
		}
		dst := TargetType(ti, typ)
		st, err := convertTensor(ti, data, dst)
		if err != nil {
			return fmt.Errorf("quant: %s: %w", in, err)
		}
		tensors = append(tensors, st)
	}
	return WriteStreamed(out, meta, f.Alignment, tensors)
}

// TargetType is the type QuantizeFile stores tensor ti in when the model's target is typ.
// Q8_0 and Q4_0 sources are requantized (dequantized, then quantized again) like float ones,
// so a Q8_0 model can be turned into its own Q4_0 self-draft; that loses precision, which a
// draft can afford.
func TargetType(ti gguf.TensorInfo, typ gguf.Type) gguf.Type {
	switch ti.Type {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0:
	default:
		return ti.Type // an integer tensor: copied as is
	}
	if len(ti.Dims) < 2 || !strings.HasSuffix(ti.Name, "weight") {
		return gguf.TypeF32
	}
	if typ.BlockSize() > 1 && ti.Dims[0]%uint64(typ.BlockSize()) != 0 {
		return gguf.TypeF32
	}
	if typ == gguf.TypeQ4_0 && (ti.Name == "token_embd.weight" || ti.Name == "output.weight") {
		if ti.Type == gguf.TypeQ4_0 {
			return gguf.TypeQ4_0 // never requantize upwards: it would only add rounding
		}
		return gguf.TypeQ8_0
	}
	return typ
}

// convertTensor returns a stream that writes data (of ti's type) as dst.
func convertTensor(ti gguf.TensorInfo, data []byte, dst gguf.Type) (StreamTensor, error) {
	st := StreamTensor{Name: ti.Name, Type: dst, Dims: ti.Dims}
	if dst == ti.Type {
		st.Emit = func(w io.Writer) error { _, err := w.Write(data); return err }
		return st, nil
	}
	switch ti.Type {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0:
	default:
		return st, fmt.Errorf("tensor %s is %s: %w", ti.Name, ti.Type, ErrSourceType)
	}
	cols := 1
	if len(ti.Dims) > 0 {
		cols = int(ti.Dims[0])
	}
	rows := int(ti.Elements()) / max(cols, 1)
	srcRow := cols / max(ti.Type.BlockSize(), 1) * ti.Type.BlockBytes()
	st.Emit = func(w io.Writer) error {
		row := make([]float32, cols)
		enc := NewRowEncoder(dst, cols)
		for r := 0; r < rows; r++ {
			decodeRow(row, data[r*srcRow:(r+1)*srcRow], ti.Type)
			if _, err := w.Write(enc.Encode(row)); err != nil {
				return err
			}
		}
		return nil
	}
	return st, nil
}

func decodeRow(dst []float32, src []byte, typ gguf.Type) {
	switch typ {
	case gguf.TypeF16:
		kernels.DequantizeF16(dst, src)
		return
	case gguf.TypeQ8_0:
		kernels.DequantizeQ8_0(dst, src)
		return
	case gguf.TypeQ4_0:
		kernels.DequantizeQ4_0(dst, src)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// RowEncoder turns float32 rows into one storage type with llama-quantize's rounding, reusing
// its output buffer (valid until the next Encode).
type RowEncoder struct {
	typ gguf.Type
	buf []byte
}

// NewRowEncoder returns an encoder for rows of cols elements stored as typ (F32, F16, Q8_0 or
// Q4_0; cols a multiple of 32 for the quantized types).
func NewRowEncoder(typ gguf.Type, cols int) *RowEncoder {
	n := cols / max(typ.BlockSize(), 1) * typ.BlockBytes()
	return &RowEncoder{typ: typ, buf: make([]byte, n)}
}

// Encode converts row and returns the encoded bytes.
func (e *RowEncoder) Encode(row []float32) []byte {
	switch e.typ {
	case gguf.TypeQ8_0:
		kernels.QuantizeQ8_0Ref(e.buf, row)
	case gguf.TypeQ4_0:
		kernels.QuantizeQ4_0(e.buf, row)
	case gguf.TypeF16:
		for i, v := range row {
			binary.LittleEndian.PutUint16(e.buf[2*i:], kernels.F32ToF16(v))
		}
	default:
		for i, v := range row {
			binary.LittleEndian.PutUint32(e.buf[4*i:], math.Float32bits(v))
		}
	}
	return e.buf
}
