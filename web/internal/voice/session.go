package voice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// FrameMs is the duration of every session output frame (the pipeline's).
const FrameMs = pipeline.FrameMs

// ErrPanic wraps a panic recovered from a session.
var ErrPanic = errors.New("voice: session panicked")

// Start prepares a pipeline session. A config the client's format makes
// unusable (a sample rate, a bad setting) is a bad_format problem; anything
// else is internal_error.
func Start(id string, cfg pipeline.Config, be pipeline.Backends, obs pipeline.Observer, log zerolog.Logger) (*pipeline.Session, *Problem) {
	sess, err := pipeline.NewSession(id, cfg, be, obs, log)
	if err != nil {
		code := pipeline.CodeInternal
		if errors.Is(err, audio.ErrSampleRate) || errors.Is(err, pipeline.ErrConfig) {
			code = pipeline.CodeBadFormat
		}
		return nil, &Problem{Code: code, Message: err.Error()}
	}
	return sess, nil
}

// Run runs sess, turning a panic in it into an error wrapping ErrPanic so
// one broken session cannot take the server down.
func Run(ctx context.Context, sess *pipeline.Session, in <-chan pipeline.Input, out chan<- pipeline.Output, log zerolog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("session panicked")
			err = fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	return sess.Run(ctx, in, out)
}

// ReadUpTo reads r into buf until EOF or buf is full; n == len(buf) means
// the message may be longer (a WebSocket message over the size limit).
func ReadUpTo(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
