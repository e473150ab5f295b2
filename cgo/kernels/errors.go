package kernels

import "errors"

var (
	// ErrUnknownFeatures is returned by ForceFeatures for a name it does not know.
	ErrUnknownFeatures = errors.New("unknown kernel feature set")
	// ErrUnsupportedFeatures is returned by ForceFeatures for a tier this CPU or build lacks.
	ErrUnsupportedFeatures = errors.New("kernel feature set not supported here")
)
