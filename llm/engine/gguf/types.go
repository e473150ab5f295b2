package gguf

import (
	"fmt"
	"math"
	"math/bits"
)

// Type is a ggml tensor type, as stored in GGUF tensor infos.
type Type uint32

// Tensor types. The numbering is ggml's (ggml.h enum ggml_type); gaps are
// types ggml has removed.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

type typeTraits struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
}

// traits holds ggml's block layouts (type_traits in ggml.c).
var traits = map[Type]typeTraits{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 18},
	TypeQ4_1:    {"Q4_1", 32, 20},
	TypeQ5_0:    {"Q5_0", 32, 22},
	TypeQ5_1:    {"Q5_1", 32, 24},
	TypeQ8_0:    {"Q8_0", 32, 34},
	TypeQ8_1:    {"Q8_1", 32, 36},
	TypeQ2_K:    {"Q2_K", 256, 84},
	TypeQ3_K:    {"Q3_K", 256, 110},
	TypeQ4_K:    {"Q4_K", 256, 144},
	TypeQ5_K:    {"Q5_K", 256, 176},
	TypeQ6_K:    {"Q6_K", 256, 210},
	TypeQ8_K:    {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S:   {"IQ1_S", 256, 50},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18},
	TypeIQ3_S:   {"IQ3_S", 256, 110},
	TypeIQ2_S:   {"IQ2_S", 256, 82},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 56},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", 256, 54},
	TypeTQ2_0:   {"TQ2_0", 256, 66},
	TypeMXFP4:   {"MXFP4", 32, 17},
}

// Known reports whether t is a ggml type this package knows the layout of.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// BlockSize is the number of elements per block (1 for F32/F16, 32 for Q4_0/Q8_0);
// 0 for unknown types.
func (t Type) BlockSize() int { return traits[t].blockSize }

// BlockBytes is the number of bytes per block (4, 2, 18, 34 for F32, F16,
// Q4_0, Q8_0); 0 for unknown types.
func (t Type) BlockBytes() int { return traits[t].blockBytes }

// String is ggml's name for the type, or "type(N)" when unknown.
func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// TensorInfo describes one tensor. Dims lists ne0 (the contiguous dimension) first.
// Offset is relative to the start of the tensor data section.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   Type
	Offset uint64
}

// Elements is the product of the dimensions (1 for a tensor with no dims).
func (ti TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data; 0 for unknown types, and
// math.MaxUint64 when the size does not fit 64 bits (a parsed file's
// tensors never do: Parse refuses them).
func (ti TensorInfo) Bytes() uint64 {
	bs := ti.Type.BlockSize()
	if bs == 0 {
		return 0
	}
	n := uint64(1)
	for _, d := range ti.Dims {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return math.MaxUint64
		}
		n = lo
	}
	hi, lo := bits.Mul64(n/uint64(bs), uint64(ti.Type.BlockBytes()))
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// ValueType is the type tag of a GGUF metadata value.
type ValueType uint32

// Metadata value types (gguf_type in gguf.h).
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String names the value type.
func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("value_type(%d)", uint32(v))
}

// fixedSize is the encoded size of a scalar value type, 0 for string/array/unknown.
func (v ValueType) fixedSize() int {
	switch v {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize is the smallest encoding of one value of this type.
func (v ValueType) minSize() int {
	switch v {
	case ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return v.fixedSize()
}
