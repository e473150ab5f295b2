// Package asr declares the speech recognition contract the pipeline uses.
// Backends live in sub-packages (asr/sphinx, ...).
package asr

import (
	"context"
	"errors"
	"time"
)

// Recognizer starts one recognition stream per utterance. It is safe for
// concurrent use: every session calls Start on the same Recognizer.
type Recognizer interface {
	// Start begins an utterance. sampleRate is the rate of the PCM that
	// will be written; backends return ErrSampleRate for a rate they
	// cannot take. ctx bounds the whole stream: when it is cancelled the
	// stream stops and Results is closed without a final.
	Start(ctx context.Context, sampleRate int) (Stream, error)
}

// Stream is one utterance being recognised. Write and Close are called from
// a single goroutine (the pipeline's ASR stage).
//
// Results is buffered. Partials are dropped rather than block Write when the
// reader falls behind (a later partial supersedes them anyway); the final is
// always delivered: the buffer keeps room for it, so Close never blocks on
// the reader. The caller should drain Results between Writes.
type Stream interface {
	// Write feeds audio as it arrives. pcm is mono PCM16 at the rate given
	// to Start; the stream does not retain pcm after Write returns.
	Write(pcm []int16) error
	// Results delivers partial and final hypotheses. It is closed after
	// the final (or when the stream's context ends).
	Results() <-chan Result
	// Close marks the end of the utterance: flushes, emits the final and
	// releases the stream's resources. Close is idempotent.
	Close() error
}

// Result is one hypothesis.
type Result struct {
	Text  string
	Final bool
	At    time.Time // when the hypothesis was produced
}

// Sessioner is implemented by recognisers that keep state per conversation
// (asr/sphinx keeps each session's cepstral mean, the channel estimate that
// normalises its audio, from one utterance to the next). The pipeline calls
// NewSession once per session when the Recognizer implements it, starts
// that session's utterances on the returned Session and closes it when the
// session ends.
type Sessioner interface {
	NewSession(SessionOptions) Session
}

// SessionOptions describe the audio a session will send.
type SessionOptions struct {
	// InputRate is the client's sample rate before the pipeline resamples
	// it to Start's rate (8000 for telephone audio); 0 when unknown. A
	// backend may pick settings for the band the audio really carries.
	InputRate int
}

// Session is a Recognizer bound to one conversation. Start and Close come
// from the session's ASR goroutine.
type Session interface {
	Recognizer
	// Close forgets the session's state. Streams still open finish
	// normally. Idempotent.
	Close() error
}

// ErrSampleRate is returned by Start for a sample rate the backend cannot use.
var ErrSampleRate = errors.New("asr: unsupported sample rate")
