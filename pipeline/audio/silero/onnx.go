package silero

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The few fields of onnx.proto that hold a graph's weights: ModelProto.graph
// (7) → GraphProto.initializer (5) → TensorProto{dims 1, data_type 2,
// float_data 4, name 8, raw_data 9, data_location 14}. Everything else in
// the file (the nodes, which this package implements in Go) is skipped.
const (
	fieldModelGraph       = 7
	fieldGraphInitializer = 5
	fieldTensorDims       = 1
	fieldTensorDataType   = 2
	fieldTensorFloatData  = 4
	fieldTensorName       = 8
	fieldTensorRawData    = 9
	fieldTensorLocation   = 14
	onnxFloat             = 1 // TensorProto.DataType FLOAT
)

// tensor is one float32 initializer.
type tensor struct {
	dims []int
	data []float32
}

// protoField is one decoded protobuf field: the varint value for wire type
// 0, the bytes for wire type 2.
type protoField struct {
	num   int
	wire  int
	value uint64
	bytes []byte
}

// nextField decodes the field at the start of b and returns the rest.
func nextField(b []byte) (protoField, []byte, error) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return protoField{}, nil, fmt.Errorf("%w: bad field key", ErrModel)
	}
	b = b[n:]
	f := protoField{num: int(key >> 3), wire: int(key & 7)}
	switch f.wire {
	case 0:
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return f, nil, fmt.Errorf("%w: bad varint in field %d", ErrModel, f.num)
		}
		f.value, b = v, b[n:]
	case 1:
		if len(b) < 8 {
			return f, nil, fmt.Errorf("%w: truncated field %d", ErrModel, f.num)
		}
		f.value, b = binary.LittleEndian.Uint64(b), b[8:]
	case 2:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return f, nil, fmt.Errorf("%w: truncated field %d", ErrModel, f.num)
		}
		f.bytes, b = b[n:n+int(l)], b[n+int(l):]
	case 5:
		if len(b) < 4 {
			return f, nil, fmt.Errorf("%w: truncated field %d", ErrModel, f.num)
		}
		f.value, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
	default:
		return f, nil, fmt.Errorf("%w: wire type %d in field %d", ErrModel, f.wire, f.num)
	}
	return f, b, nil
}

// readInitializers returns the float32 initializers of an ONNX model's main
// graph by name.
func readInitializers(model []byte) (map[string]tensor, error) {
	var graph []byte
	for b := model; len(b) > 0; {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		if f.num == fieldModelGraph && f.wire == 2 {
			graph = f.bytes
		}
		b = rest
	}
	if graph == nil {
		return nil, fmt.Errorf("%w: no graph", ErrModel)
	}
	out := make(map[string]tensor)
	for b := graph; len(b) > 0; {
		f, rest, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if f.num != fieldGraphInitializer || f.wire != 2 {
			continue
		}
		name, t, err := readTensor(f.bytes)
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", name, err)
		}
		if t.data != nil {
			out[name] = t
		}
	}
	return out, nil
}

// readTensor decodes a TensorProto; a tensor that is not FLOAT comes back
// with nil data (the graph's int64 constants are not weights).
func readTensor(b []byte) (string, tensor, error) {
	var (
		name     string
		t        tensor
		dtype    uint64
		raw      []byte
		floats   []float32
		external bool
	)
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return name, t, err
		}
		b = rest
		switch {
		case f.num == fieldTensorDims && f.wire == 0:
			t.dims = append(t.dims, int(f.value))
		case f.num == fieldTensorDims && f.wire == 2: // packed
			for p := f.bytes; len(p) > 0; {
				v, n := binary.Uvarint(p)
				if n <= 0 {
					return name, t, fmt.Errorf("%w: bad packed dims", ErrModel)
				}
				t.dims, p = append(t.dims, int(v)), p[n:]
			}
		case f.num == fieldTensorDataType && f.wire == 0:
			dtype = f.value
		case f.num == fieldTensorFloatData && f.wire == 2: // packed
			for p := f.bytes; len(p) >= 4; p = p[4:] {
				floats = append(floats, math.Float32frombits(binary.LittleEndian.Uint32(p)))
			}
		case f.num == fieldTensorFloatData && f.wire == 5:
			floats = append(floats, math.Float32frombits(uint32(f.value)))
		case f.num == fieldTensorName && f.wire == 2:
			name = string(f.bytes)
		case f.num == fieldTensorRawData && f.wire == 2:
			raw = f.bytes
		case f.num == fieldTensorLocation && f.wire == 0:
			external = f.value == 1
		}
	}
	if dtype != onnxFloat {
		return name, t, nil
	}
	if external {
		return name, t, fmt.Errorf("%w: weights in an external file", ErrModel)
	}
	want := 1
	for _, d := range t.dims {
		want *= d
	}
	switch {
	case raw != nil:
		if len(raw) != 4*want {
			return name, t, fmt.Errorf("%w: %d bytes of data for dims %v", ErrModel, len(raw), t.dims)
		}
		t.data = make([]float32, want)
		for i := range t.data {
			t.data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case len(floats) == want:
		t.data = floats
	default:
		return name, t, fmt.Errorf("%w: %d values for dims %v", ErrModel, len(floats), t.dims)
	}
	return name, t, nil
}
