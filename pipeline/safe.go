package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"
)

// ErrPanic wraps a panic recovered in a stage or a backend call. A stage
// goroutine runs in an errgroup, which does not carry a panic to Run's
// caller: unrecovered, one would end the process and every session.
var ErrPanic = errors.New("pipeline: panic")

func panicError(what string, p any, log zerolog.Logger) error {
	log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg(what + " panicked")
	return fmt.Errorf("%w in %s: %v", ErrPanic, what, p)
}

// guard runs a stage, turning a panic into an error: the session ends,
// the others go on.
func guard(stage string, log zerolog.Logger, run func() error) func() error {
	return func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = panicError("stage "+stage, p, log)
			}
		}()
		return run()
	}
}

// safeCall runs one backend call, turning a panic into its error: the
// caller fails the turn as for any backend error, and the session goes on.
func safeCall[T any](ctx context.Context, what string, log zerolog.Logger, call func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(what, p, log)
		}
	}()
	return call(ctx)
}
