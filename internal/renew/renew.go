// Package renew replaces a speech engine instance that keeps failing.
//
// ASR and TTS wrap an asr.Recognizer or a tts.Synthesizer built by a
// function. Every utterance (ASR: Start, the stream's Writes and its Close)
// and every synthesis (TTS) is a success or a failure; a failure is an
// error the caller did not cause (not its context ending, not a sample rate
// the engine refuses) or a panic. After Options.After failures among the
// last 2×After calls (not only in a row: one bad decoder in a pool of
// several fails every other utterance) the wrapper builds a fresh instance in the background, keeps serving from the
// old one meanwhile, then switches: new calls go to the new instance, calls
// in flight finish on the old one, which is closed when the last of them
// ends. A failed build is logged and tried again after the next After
// failures.
//
// A panic is counted and then re-raised on the caller's goroutine (the
// pipeline turns it into a failed turn); the wrapper's own state is never
// left locked.
package renew

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/rs/zerolog"
)

// Options tune a wrapper.
type Options struct {
	// After is how many failures among the last 2×After calls replace the
	// instance; 0 = never.
	After int
	// Name names the engine in log lines ("asr sphinx").
	Name string
	Log  zerolog.Logger
	// OnReplace, when set, is called after each replacement (a metric).
	OnReplace func()
}

// ErrConfig is a wrapper that cannot be built.
var ErrConfig = errors.New("renew: bad config")

// errPanicked stands for a panic in the failure count.
var errPanicked = errors.New("panicked")

// instance is one built engine and the calls using it.
type instance[T any] struct {
	v       T
	closer  io.Closer
	refs    int  // calls, streams and sessions in flight (core.mu)
	retired bool // replaced: closed when refs reaches 0 (core.mu)
}

// core is the replacement logic both wrappers share.
type core[T any] struct {
	build func() (T, io.Closer, error)
	opts  Options

	mu         sync.Mutex // guards the fields below and every instance's refs and retired
	cur        *instance[T]
	recent     []bool // cur's last 2×After outcomes, true = failed (a ring)
	next       int    // where recent's next outcome goes
	rebuilding bool
	closed     bool
	replaced   int
	wg         sync.WaitGroup // background builds
}

func newCore[T any](build func() (T, io.Closer, error), opts Options) (*core[T], error) {
	if opts.After < 0 {
		return nil, fmt.Errorf("%w: After %d", ErrConfig, opts.After)
	}
	v, cl, err := build()
	if err != nil {
		return nil, err
	}
	return &core[T]{build: build, opts: opts, cur: &instance[T]{v: v, closer: cl}}, nil
}

// acquire returns the current instance with a reference taken.
func (c *core[T]) acquire() *instance[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.refs++
	return c.cur
}

// release drops a reference; the last one of a retired instance closes it.
func (c *core[T]) release(i *instance[T]) {
	c.mu.Lock()
	i.refs--
	last := i.retired && i.refs == 0
	c.mu.Unlock()
	if last {
		c.closeInstance(i)
	}
}

func (c *core[T]) closeInstance(i *instance[T]) {
	if i.closer == nil {
		return
	}
	if err := i.closer.Close(); err != nil {
		c.opts.Log.Warn().Err(err).Str("engine", c.opts.Name).Msg("closing a replaced engine instance")
	}
}

// result records how a call on i went (err nil: it worked).
func (c *core[T]) result(i *instance[T], err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i != c.cur {
		return // the old instance's failures no longer matter
	}
	if c.opts.After == 0 {
		return
	}
	if c.recent == nil {
		c.recent = make([]bool, 2*c.opts.After)
	}
	c.recent[c.next] = err != nil
	c.next = (c.next + 1) % len(c.recent)
	fails := 0
	for _, f := range c.recent {
		if f {
			fails++
		}
	}
	if err == nil || fails < c.opts.After || c.rebuilding || c.closed {
		return
	}
	c.opts.Log.Warn().Str("engine", c.opts.Name).Int("failures", fails).Int("of", len(c.recent)).AnErr("last", err).
		Msg("engine instance keeps failing: building a new one")
	c.rebuilding = true
	c.wg.Go(c.rebuild)
}

func (c *core[T]) rebuild() {
	v, cl, err := c.safeBuild()
	c.mu.Lock()
	c.rebuilding = false
	clear(c.recent)
	if err != nil || c.closed {
		closed := c.closed
		c.mu.Unlock()
		if err != nil {
			c.opts.Log.Error().Err(err).Str("engine", c.opts.Name).Msg("building a new engine instance failed; the old one goes on")
		} else if closed && cl != nil {
			_ = cl.Close()
		}
		return
	}
	old := c.cur
	c.cur = &instance[T]{v: v, closer: cl}
	c.replaced++
	old.retired = true
	idle := old.refs == 0
	c.mu.Unlock()
	c.opts.Log.Warn().Str("engine", c.opts.Name).Msg("engine instance replaced")
	if c.opts.OnReplace != nil {
		c.opts.OnReplace()
	}
	if idle {
		c.closeInstance(old)
	}
}

func (c *core[T]) safeBuild() (v T, cl io.Closer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("renew: building %s panicked: %v", c.opts.Name, p)
		}
	}()
	return c.build()
}

// Replaced is how many times the instance was replaced.
func (c *core[T]) Replaced() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaced
}

// Close waits for a build in progress and closes the current instance.
func (c *core[T]) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	cur := c.cur
	cur.retired = true
	c.mu.Unlock()
	if cur.closer != nil {
		return cur.closer.Close()
	}
	return nil
}

// countable says whether err, from a call under ctx, is the engine's
// failure rather than the caller's doing.
func countable(ctx context.Context, err error, callers ...error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, e := range callers {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}
