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
// the lock for a few milliseconds. The EmitFunc runs inside the lock, so it
// must never block (tts/stream queues the chunks and sends them after).
//
// Without cgo the package builds, and every constructor returns ErrNoCgo.
package espeak

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

// WordMark says that the text up to byte TextEnd has been spoken once
// EndSample samples of the synthesis have played.
type WordMark struct {
	TextEnd   int
	EndSample int
}

// EmitFunc receives the audio of one synthesis in order, as espeak produces
// it. pcm is freshly allocated for each call, so the receiver may keep it;
// it is empty when espeak closes words without audio. words lists the words
// whose audio ended by the end of pcm and were not reported before, with
// EndSample counted from the start of the synthesis (a word may end in an
// earlier call's pcm: espeak closes a word when the next one starts). It
// runs while the engine lock is held and must not block. A non-nil error
// stops the synthesis; Synthesize returns it.
type EmitFunc func(pcm []int16, words []WordMark) error
