package quant

import "errors"

var (
	// ErrTargetType means QuantizeFile was asked for a type it cannot produce.
	ErrTargetType = errors.New("quant: unsupported target type (want Q8_0, Q4_0, F16 or F32)")
	// ErrSourceType means a weight tensor is stored in a type that cannot be converted.
	ErrSourceType = errors.New("quant: unsupported source tensor type (want F32 or F16)")
	// ErrTensorSize means a streamed tensor produced a different number of bytes than its shape needs.
	ErrTensorSize = errors.New("quant: tensor data size mismatch")
)
