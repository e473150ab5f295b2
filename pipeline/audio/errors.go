package audio

import "errors"

// Sentinel errors. Functions wrap them with %w and add the specifics
// (the rate, the format code, the byte offset), so test with errors.Is.
var (
	// ErrSampleRate is returned for a sample rate the component does not support.
	ErrSampleRate = errors.New("audio: unsupported sample rate")
	// ErrConfig is returned by NewVAD for an inconsistent VADConfig.
	ErrConfig = errors.New("audio: invalid config")
	// ErrNotRIFF is returned when a WAV stream does not start with RIFF....WAVE.
	ErrNotRIFF = errors.New("audio: not a RIFF/WAVE stream")
	// ErrWAVFormat is returned for a WAV file that is not PCM16 (the format
	// code or bit depth is named in the wrapped message).
	ErrWAVFormat = errors.New("audio: unsupported WAV format")
	// ErrTruncated is returned when a WAV stream ends inside a header or
	// inside its data chunk.
	ErrTruncated = errors.New("audio: truncated WAV")
	// ErrChannels is returned for a channel count of zero, or one the
	// component cannot handle, or sample data that is not a whole number
	// of frames.
	ErrChannels = errors.New("audio: invalid channel count")
	// ErrFrameSize is returned by the Opus wrappers for a PCM length that
	// is not an Opus frame duration at the coder's rate.
	ErrFrameSize = errors.New("audio: invalid opus frame size")
	// ErrBuffer is returned when a caller-provided output buffer is too small.
	ErrBuffer = errors.New("audio: output buffer too small")
	// ErrOpus wraps failures reported by libopus.
	ErrOpus = errors.New("audio: opus")
	// ErrNoCgo is returned by the Opus wrappers in builds without cgo.
	ErrNoCgo = errors.New("audio: opus requires cgo (built with CGO_ENABLED=0)")
)
