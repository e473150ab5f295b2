package silero

import "errors"

var (
	// ErrModel is returned when the ONNX file is not the Silero VAD graph
	// this package implements (a missing or misshapen weight is named).
	ErrModel = errors.New("silero: unsupported model")
	// ErrWindow is returned by Detector.Window for a window that is not
	// WindowSize samples.
	ErrWindow = errors.New("silero: window is not 512 samples")
)
