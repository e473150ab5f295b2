// Package tts declares the speech synthesis contract the pipeline uses.
// Backends live in sub-packages (tts/flite, tts/espeak, ...).
package tts

import (
	"context"
	"errors"
)

// Synthesizer turns text into audio, streaming it as the engine produces it.
// It is safe for concurrent use; backends whose engine is not thread-safe
// serialise inside Synthesize.
type Synthesizer interface {
	// SampleRate is the rate of every Chunk's PCM (mono PCM16).
	SampleRate() int
	// Synthesize speaks text, sending chunks to out as soon as the engine
	// produces them (never after the whole text). It returns when the text
	// is spoken, ctx is cancelled (ctx.Err()) or the engine fails. It never
	// closes out: the caller owns it. Ownership of each Chunk passes to the
	// receiver.
	Synthesize(ctx context.Context, text string, out chan<- Chunk) error
}

// Chunk is a piece of synthesized audio.
type Chunk struct {
	PCM []int16
	// Words lists the words whose audio ends inside this chunk, from the
	// engine's own timings (a chunk without PCM carries marks that end
	// with the audio before it, as a service reports "all heard" after its
	// last audio). Together with the client's playback reports
	// they tell exactly which text was heard when a turn is interrupted.
	Words []WordMark
}

// WordMark says that the text up to byte TextEnd of the synthesized string
// has been spoken once EndSample samples of this Synthesize call's audio
// have played.
type WordMark struct {
	TextEnd   int
	EndSample int
}

// ErrVoice is returned when the configured voice does not exist.
var ErrVoice = errors.New("tts: unknown voice")
