package renew

import (
	"context"
	"fmt"
	"io"

	"github.com/voxpipe/voxpipe/tts"
)

// TTS is a tts.Synthesizer that replaces its instance after Options.After
// failed syntheses among the last 2×After. A replacement must speak at the first
// instance's sample rate (sessions were set up for it); one that does not is
// discarded as a failed build. It is safe for concurrent use.
type TTS struct {
	c    *core[tts.Synthesizer]
	rate int
}

var _ tts.Synthesizer = (*TTS)(nil)

// NewTTS builds the first instance with build and returns the wrapper.
func NewTTS(build func() (tts.Synthesizer, io.Closer, error), opts Options) (*TTS, error) {
	t := &TTS{}
	c, err := newCore(func() (tts.Synthesizer, io.Closer, error) {
		s, cl, err := build()
		if err == nil && t.rate != 0 && s.SampleRate() != t.rate {
			if cl != nil {
				_ = cl.Close()
			}
			return nil, nil, fmt.Errorf("renew: new %s speaks at %d Hz, not %d", opts.Name, s.SampleRate(), t.rate)
		}
		return s, cl, err
	}, opts)
	if err != nil {
		return nil, err
	}
	t.c, t.rate = c, c.cur.v.SampleRate()
	return t, nil
}

// SampleRate is the first instance's.
func (t *TTS) SampleRate() int { return t.rate }

// Synthesize speaks text on the current instance.
func (t *TTS) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) (err error) {
	i := t.c.acquire()
	defer t.c.release(i)
	defer func() {
		if p := recover(); p != nil {
			t.c.result(i, errPanicked)
			panic(p)
		}
	}()
	err = i.v.Synthesize(ctx, text, out)
	switch {
	case err == nil:
		t.c.result(i, nil)
	case countable(ctx, err):
		t.c.result(i, err)
	}
	return err
}

// Close closes the current instance (after a build in progress).
func (t *TTS) Close() error { return t.c.Close() }

// Replaced is how many times the instance was replaced.
func (t *TTS) Replaced() int { return t.c.Replaced() }
