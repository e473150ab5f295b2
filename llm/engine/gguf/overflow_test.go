package gguf

import (
	"bytes"
	"errors"
	"testing"
)

// crafted2p62 is a 100-byte file declaring one F32 tensor of 2^62
// elements: 2^64 bytes, which used to wrap to 0 and pass the size check.
func crafted2p62() []byte {
	var buf bytes.Buffer
	e := &encoder{w: &countingWriter{w: &buf}}
	e.u32(magic)
	e.u32(3)
	e.u64(1) // tensors
	e.u64(0) // metadata
	e.str("t")
	e.u32(2)
	e.u64(1 << 31)
	e.u64(1 << 31)
	e.u32(uint32(TypeF32))
	e.u64(0)
	e.pad(DefaultAlignment)
	for buf.Len() < 100 {
		buf.WriteByte(0)
	}
	return buf.Bytes()
}

func TestTensorBytesOverflowRefused(t *testing.T) {
	data := crafted2p62()
	f, err := Parse(data)
	if err == nil {
		_, d, _ := f.Tensor("t")
		t.Fatalf("parsed a %d-byte file whose tensor needs 2^64 bytes (Bytes() = %d, data %d bytes)", len(data), f.Tensors[0].Bytes(), len(d))
	}
	if !errors.Is(err, ErrShape) {
		t.Errorf("got %v, want ErrShape", err)
	}
	ti := TensorInfo{Dims: []uint64{1 << 40, 1 << 40}, Type: TypeF32}
	if b := ti.Bytes(); b != 1<<64-1 {
		t.Errorf("Bytes of 2^80 elements = %d, want saturated", b)
	}
}
