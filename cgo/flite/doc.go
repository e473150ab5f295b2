// Package flite binds flite 2.2 (Festival Lite) and its CMU English voices
// slt, rms, awb (clustergen) and kal16 (diphone), streaming 16 kHz mono
// PCM16 with word timings.
//
// # Concurrency
//
// flite is not thread-safe: voices are process-wide objects whose features
// (rate, pitch, the streaming callback) are global state, and its error
// handling goes through one global jump buffer. Every call into flite is
// serialised by one process-wide lock. A synthesis holds it while it runs:
// flite runs at ~0.02 of real time (kal16 ~0.001), so one sentence holds it
// for tens of milliseconds.
//
// Without cgo the package builds, and every constructor returns ErrNoCgo.
package flite

import "github.com/voxpipe/voxpipe/tts"

// SampleRate is the rate of every voice's output.
const SampleRate = 16000

// Voices lists the voice names OpenVoice accepts.
func Voices() []string { return []string{"slt", "rms", "awb", "kal16"} }

// Options tunes one synthesis.
type Options struct {
	// Rate scales speaking speed: 1 (or 0) is the voice's own, 2 twice as
	// fast. Applied as flite's duration_stretch = voice default / Rate.
	Rate float64
	// Pitch is the target mean F0 in Hz; 0 keeps the voice's default.
	// slt, awb and kal16 follow it; rms ignores it (flite 2.2 does not
	// shift that voice's F0).
	Pitch float64
}

// EmitFunc receives the audio of one synthesis in order. pcm is freshly
// allocated for each call, so the receiver may keep it. words lists the
// words whose audio ends inside pcm, with EndSample counted from the start
// of the whole synthesis. A non-nil error stops the synthesis; Synthesize
// returns it.
//
// Each chunk is handed over when the engine produces the next one (or
// finishes), so that words the engine closes in a trailing empty callback
// still land in a chunk that carries audio. That costs one chunk of engine
// time: under 1 ms for flite's clustergen voices, ~0.05 ms for espeak.
type EmitFunc func(pcm []int16, words []tts.WordMark) error

func knownVoice(name string) bool {
	for _, v := range Voices() {
		if v == name {
			return true
		}
	}
	return false
}
