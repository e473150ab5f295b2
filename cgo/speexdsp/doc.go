// Package speexdsp binds libspeexdsp's acoustic echo canceller (MDF, the
// speex_echo_* calls) and its preprocessor (spectral noise suppression and
// residual echo suppression, speex_preprocess_*), behind one pure-Go type,
// Processor, that cleans a microphone's frames.
//
// speexdsp was chosen over libwebrtc-audio-processing because its C API is
// plain C (webrtc's is C++ only, which would need a shim of our own), its
// echo canceller takes the far-end reference frame by frame next to the
// microphone frame (the pipeline knows what it sent, frame by frame), and
// its adaptive filter's length is ours to set, so one long filter covers
// the unknown playout delay of a device (see NewProcessor).
//
// # Concurrency
//
// A Processor is not safe for concurrent use: give each one a single
// owner (one session's audio-in goroutine). Different Processors share
// nothing and may run at the same time.
//
// Without cgo the package builds, and NewProcessor returns ErrNoCgo.
package speexdsp
