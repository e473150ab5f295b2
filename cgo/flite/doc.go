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
// for tens of milliseconds. The EmitFunc runs inside the lock, so it must
// never block (tts/stream queues the chunks and sends them after).
//
// Without cgo the package builds, and every constructor returns ErrNoCgo.
package flite

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

// WordMark says that the text up to byte TextEnd has been spoken once
// EndSample samples of the synthesis have played.
type WordMark struct {
	TextEnd   int
	EndSample int
}

// EmitFunc receives the audio of one synthesis in order, as flite produces
// it. pcm is freshly allocated for each call, so the receiver may keep it;
// it is empty when flite closes words without audio. words lists the words
// whose audio ended by the end of pcm and were not reported before, with
// EndSample counted from the start of the whole synthesis (a word may end
// in an earlier call's pcm: flite closes the last word of an utterance in a
// later callback). It runs while the engine lock is held and must not
// block. A non-nil error stops the synthesis; Synthesize returns it.
type EmitFunc func(pcm []int16, words []WordMark) error

func knownVoice(name string) bool {
	for _, v := range Voices() {
		if v == name {
			return true
		}
	}
	return false
}
