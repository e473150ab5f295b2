package renew

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/tts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBroken = errors.New("decoder broken")

// fakeRec is one engine instance: broken ones fail every Write (or panic);
// sessions are counted so a test sees them follow a replacement.
type fakeRec struct {
	id       int
	broken   bool
	panics   bool
	closed   atomic.Bool
	sessions atomic.Int32
}

func (r *fakeRec) Start(ctx context.Context, rate int) (asr.Stream, error) {
	if rate != 16000 {
		return nil, asr.ErrSampleRate
	}
	if r.panics {
		panic("start blew up")
	}
	return &fakeStream{r: r, res: make(chan asr.Result, 1)}, nil
}

func (r *fakeRec) NewSession(asr.SessionOptions) asr.Session {
	r.sessions.Add(1)
	return &fakeSession{r}
}

func (r *fakeRec) Close() error {
	if r.closed.Swap(true) {
		return errors.New("closed twice")
	}
	return nil
}

type fakeSession struct{ *fakeRec }

func (s *fakeSession) Close() error { s.sessions.Add(-1); return nil }

type fakeStream struct {
	r   *fakeRec
	res chan asr.Result
}

func (s *fakeStream) Write([]int16) error {
	if s.r.broken {
		return errBroken
	}
	return nil
}
func (s *fakeStream) Results() <-chan asr.Result { return s.res }
func (s *fakeStream) Close() error {
	s.res <- asr.Result{Text: "ok", Final: true}
	close(s.res)
	return nil
}

// builder makes instance 1 with the fault given, then healthy ones.
type builder struct {
	mu    sync.Mutex
	built []*fakeRec
	fault func(*fakeRec)
	fail  bool // the next build fails
}

func (b *builder) build() (asr.Recognizer, io.Closer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail {
		b.fail = false
		return nil, nil, errors.New("model missing")
	}
	r := &fakeRec{id: len(b.built) + 1}
	if len(b.built) == 0 && b.fault != nil {
		b.fault(r)
	}
	b.built = append(b.built, r)
	return r, r, nil
}

func (b *builder) instances() []*fakeRec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fakeRec(nil), b.built...)
}

// utter runs one utterance and says whether it worked.
func utter(t *testing.T, rec asr.Recognizer) error {
	t.Helper()
	st, err := rec.Start(context.Background(), 16000)
	if err != nil {
		return err
	}
	werr := st.Write(make([]int16, 320))
	if err := st.Close(); err != nil {
		return err
	}
	return werr
}

func waitReplaced(t *testing.T, replaced func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for replaced() < n {
		if time.Now().After(deadline) {
			t.Fatalf("replaced %d times, want %d", replaced(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A decoder that fails every utterance is replaced after After failures in
// a row; the next utterances work and the broken one is closed. Without the
// wrapper every later utterance failed too.
func TestASRBrokenInstanceReplaced(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.broken = true }}
	a, err := NewASR(b.build, Options{After: 3, Name: "fake", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for k := range 3 {
		if err := utter(t, a); !errors.Is(err, errBroken) {
			t.Fatalf("utterance %d: %v, want the broken decoder's error", k, err)
		}
	}
	waitReplaced(t, a.Replaced, 1)
	for k := range 5 {
		if err := utter(t, a); err != nil {
			t.Fatalf("after the replacement, utterance %d: %v", k, err)
		}
	}
	inst := b.instances()
	if len(inst) != 2 || !inst[0].closed.Load() || inst[1].closed.Load() {
		t.Errorf("instances %d, first closed %v, second closed %v: want the broken one closed, the new one open",
			len(inst), inst[0].closed.Load(), len(inst) > 1 && inst[1].closed.Load())
	}
}

// Failures that are the caller's (a cancelled context, a sample rate the
// engine refuses) and failures broken by a success do not replace it.
func TestASRCallerErrorsDoNotCount(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.broken = true }}
	a, err := NewASR(b.build, Options{After: 2, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 5 {
		if _, err := a.Start(context.Background(), 8000); !errors.Is(err, asr.ErrSampleRate) {
			t.Fatalf("Start at 8 kHz: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		st, _ := a.Start(ctx, 16000)
		cancel()
		_ = st.Write(nil)
		_ = st.Close()
	}
	time.Sleep(50 * time.Millisecond)
	if n := a.Replaced(); n != 0 {
		t.Errorf("replaced %d times for the caller's errors", n)
	}
}

// A recogniser whose Start panics is replaced too; each panic still
// reaches the caller, and the wrapper stays usable.
func TestASRPanicsReplace(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.panics = true }}
	a, err := NewASR(b.build, Options{After: 2, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 2 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			_, _ = a.Start(context.Background(), 16000)
		}()
	}
	waitReplaced(t, a.Replaced, 1)
	if err := utter(t, a); err != nil {
		t.Fatal(err)
	}
}

// A session opened before the replacement moves to a session of the new
// instance at its next utterance; the old session is closed.
func TestASRSessionsFollow(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.broken = true }}
	a, err := NewASR(b.build, Options{After: 1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sess := a.NewSession(asr.SessionOptions{InputRate: 16000})
	if err := utter(t, sess); !errors.Is(err, errBroken) {
		t.Fatal(err)
	}
	waitReplaced(t, a.Replaced, 1)
	if err := utter(t, sess); err != nil {
		t.Fatal(err)
	}
	inst := b.instances()
	if inst[0].sessions.Load() != 0 || inst[1].sessions.Load() != 1 || !inst[0].closed.Load() {
		t.Errorf("sessions old %d new %d, old closed %v", inst[0].sessions.Load(), inst[1].sessions.Load(), inst[0].closed.Load())
	}
	_ = sess.Close()
	if inst[1].sessions.Load() != 0 {
		t.Error("the session's inner session was not closed")
	}
}

// A failed build keeps the old instance and is tried again later.
func TestASRFailedBuildRetried(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.broken = true }}
	a, err := NewASR(b.build, Options{After: 1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b.mu.Lock()
	b.fail = true
	b.mu.Unlock()
	_ = utter(t, a)
	time.Sleep(50 * time.Millisecond)
	if a.Replaced() != 0 {
		t.Fatal("replaced although the build failed")
	}
	_ = utter(t, a)
	waitReplaced(t, a.Replaced, 1)
}

// fakeTTS fails (or panics) while broken.
type fakeTTS struct {
	broken, panics bool
	rate           int
	closed         atomic.Bool
}

func (f *fakeTTS) SampleRate() int { return f.rate }
func (f *fakeTTS) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	if f.panics {
		panic("synth blew up")
	}
	if f.broken {
		return errBroken
	}
	select {
	case out <- tts.Chunk{PCM: make([]int16, 10)}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (f *fakeTTS) Close() error { f.closed.Store(true); return nil }

// A synthesizer that fails or panics is replaced; one whose replacement
// speaks at another rate is kept.
func TestTTSReplaced(t *testing.T) {
	for _, fault := range []string{"error", "panic"} {
		t.Run(fault, func(t *testing.T) {
			var built []*fakeTTS
			build := func() (tts.Synthesizer, io.Closer, error) {
				f := &fakeTTS{rate: 16000}
				if len(built) == 0 {
					f.broken, f.panics = fault == "error", fault == "panic"
				}
				built = append(built, f)
				return f, f, nil
			}
			s, err := NewTTS(build, Options{After: 2, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			out := make(chan tts.Chunk, 10)
			for range 2 {
				func() {
					defer func() { _ = recover() }()
					_ = s.Synthesize(context.Background(), "hi", out)
				}()
			}
			waitReplaced(t, s.Replaced, 1)
			if err := s.Synthesize(context.Background(), "hi", out); err != nil {
				t.Fatalf("after the replacement: %v", err)
			}
			if !built[0].closed.Load() {
				t.Error("the broken synthesizer was not closed")
			}
		})
	}
	t.Run("rate", func(t *testing.T) {
		n := 0
		build := func() (tts.Synthesizer, io.Closer, error) {
			n++
			f := &fakeTTS{rate: 16000 * n, broken: true}
			return f, f, nil
		}
		s, err := NewTTS(build, Options{After: 1, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_ = s.Synthesize(context.Background(), "hi", make(chan tts.Chunk, 1))
		time.Sleep(50 * time.Millisecond)
		if s.Replaced() != 0 || s.SampleRate() != 16000 {
			t.Errorf("replaced by a 32 kHz synthesizer: %d, rate %d", s.Replaced(), s.SampleRate())
		}
	})
}

// One bad decoder among several fails every other utterance: that is
// caught too (3 of the last 6), while a rare failure is not.
func TestASRIntermittentReplaced(t *testing.T) {
	b := &builder{fault: func(r *fakeRec) { r.broken = true }}
	a, err := NewASR(b.build, Options{After: 3, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Alternate: the broken instance fails, a "good decoder" result in between.
	i := a.c.acquire()
	a.c.release(i)
	for k := range 6 {
		if k%2 == 1 {
			a.c.result(i, nil)
			continue
		}
		_ = utter(t, a)
	}
	waitReplaced(t, a.Replaced, 1)

	// A healthy instance with one failure in 6 stays.
	a.c.mu.Lock()
	cur := a.c.cur
	a.c.mu.Unlock()
	for k := range 12 {
		if k%6 == 0 {
			a.c.result(cur, errBroken)
		} else {
			a.c.result(cur, nil)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if a.Replaced() != 1 {
		t.Errorf("replaced %d times, want 1 (one failure in 6 is not a broken instance)", a.Replaced())
	}
}
