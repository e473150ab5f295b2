package renew

import (
	"context"
	"io"
	"sync"

	"github.com/voxpipe/voxpipe/asr"
)

// ASR is an asr.Recognizer (and asr.Sessioner) that replaces its instance
// after Options.After failed utterances among the last 2×After. It is safe for
// concurrent use.
type ASR struct {
	c *core[asr.Recognizer]
}

var (
	_ asr.Recognizer = (*ASR)(nil)
	_ asr.Sessioner  = (*ASR)(nil)
)

// NewASR builds the first instance with build and returns the wrapper.
func NewASR(build func() (asr.Recognizer, io.Closer, error), opts Options) (*ASR, error) {
	c, err := newCore(build, opts)
	if err != nil {
		return nil, err
	}
	return &ASR{c: c}, nil
}

// Start begins an utterance on the current instance.
func (a *ASR) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	i := a.c.acquire()
	return a.start(ctx, sampleRate, i, i.v)
}

// start starts on rec (i's recogniser or a session of it); the stream
// holds the reference taken on i until it is closed.
func (a *ASR) start(ctx context.Context, sampleRate int, i *instance[asr.Recognizer], rec asr.Recognizer) (st asr.Stream, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.c.result(i, errPanicked)
			a.c.release(i)
			panic(p)
		}
	}()
	st, err = rec.Start(ctx, sampleRate)
	if err != nil {
		if countable(ctx, err, asr.ErrSampleRate) {
			a.c.result(i, err)
		}
		a.c.release(i)
		return nil, err
	}
	return &stream{Stream: st, a: a, i: i, ctx: ctx}, nil
}

// Close closes the current instance (after a build in progress).
func (a *ASR) Close() error { return a.c.Close() }

// Replaced is how many times the instance was replaced.
func (a *ASR) Replaced() int { return a.c.Replaced() }

// stream watches one utterance for failures.
type stream struct {
	asr.Stream
	a      *ASR
	i      *instance[asr.Recognizer]
	ctx    context.Context
	failed error // Write's first countable error (the ASR stage's goroutine)
	once   sync.Once
}

func (s *stream) Write(pcm []int16) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.failed = errPanicked
			panic(p) // Close still settles the count and the reference
		}
	}()
	err = s.Stream.Write(pcm)
	if s.failed == nil && countable(s.ctx, err) {
		s.failed = err
	}
	return err
}

func (s *stream) Close() (err error) {
	panicked := true
	defer func() {
		s.once.Do(func() {
			switch {
			case panicked:
				s.failed = errPanicked
			case s.failed == nil && countable(s.ctx, err):
				s.failed = err
			}
			if s.ctx.Err() == nil || s.failed != nil {
				s.a.c.result(s.i, s.failed) // a cancelled utterance proves nothing either way
			}
			s.a.c.release(s.i)
		})
		// A panic goes on up: it was counted, the reference is released.
	}()
	err = s.Stream.Close()
	panicked = false
	return err
}

// NewSession returns a session that follows replacements: its first Start
// after one opens a session on the new instance.
func (a *ASR) NewSession(opts asr.SessionOptions) asr.Session {
	return &session{a: a, opts: opts}
}

type session struct {
	a    *ASR
	opts asr.SessionOptions

	mu    sync.Mutex // guards the fields below
	i     *instance[asr.Recognizer]
	inner asr.Session // nil when the instance keeps no sessions
}

func (s *session) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	s.mu.Lock()
	i := s.a.c.acquire() // the stream's reference
	if s.i != i {
		s.closeLocked()
		s.a.c.mu.Lock()
		i.refs++ // the session's own reference
		s.a.c.mu.Unlock()
		s.i = i
		if sr, ok := i.v.(asr.Sessioner); ok {
			s.inner = sr.NewSession(s.opts)
		}
	}
	rec := i.v
	if s.inner != nil {
		rec = s.inner
	}
	s.mu.Unlock()
	return s.a.start(ctx, sampleRate, i, rec)
}

func (s *session) closeLocked() {
	if s.i == nil {
		return
	}
	if s.inner != nil {
		_ = s.inner.Close()
		s.inner = nil
	}
	s.a.c.release(s.i)
	s.i = nil
}

func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}
