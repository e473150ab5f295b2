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

// ErrSampleRate is returned by Start for a sample rate the backend cannot use.
var ErrSampleRate = errors.New("asr: unsupported sample rate")
