// Package espeak binds espeak-ng (22050 Hz mono PCM16, ~100 languages) in
// synchronous mode, streaming audio with word timings.
//
// # Concurrency
//
// espeak-ng is a process-wide singleton: one current voice, one set of
// parameters, one synthesis at a time. The package initialises it once and
// serialises every call with one process-wide lock; each synthesis sets
// its voice, rate and pitch inside the lock, since another Speaker may have
// changed them. espeak runs at ~0.001 of real time, so one sentence holds
// the lock for a few milliseconds.
//
// Without cgo the package builds, and every constructor returns ErrNoCgo.
package espeak

import "github.com/voxpipe/voxpipe/tts"

// SampleRate is espeak-ng's output rate.
const SampleRate = 22050

// Rate limits and defaults, in words per minute.
const (
	MinRate     = 80
	MaxRate     = 450
	DefaultRate = 175
)

// Options tunes one synthesis.
type Options struct {
	Rate  int // words per minute, MinRate..MaxRate; 0 = DefaultRate
	Pitch int // base pitch 0..100 (50 is espeak's normal)
}

// EmitFunc receives the audio of one synthesis in order. pcm is freshly
// allocated for each call, so the receiver may keep it. words lists the
// words whose audio ends inside pcm, with EndSample counted from the start
// of the synthesis. A non-nil error stops the synthesis; Synthesize returns
// it.
//
// Each chunk is handed over when the engine produces the next one (or
// finishes), so that words the engine closes in a trailing empty callback
// still land in a chunk that carries audio. That costs one chunk of engine
// time: under 1 ms for flite's clustergen voices, ~0.05 ms for espeak.
type EmitFunc func(pcm []int16, words []tts.WordMark) error
