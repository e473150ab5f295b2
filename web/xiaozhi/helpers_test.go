package xiaozhi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/asr"
	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// scriptedModel answers the i-th request with answers[min(i, len-1)], one
// word per token, each after delay.
type scriptedModel struct {
	answers []string
	delay   time.Duration

	mu       sync.Mutex
	requests []llm.Request
}

func (m *scriptedModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	i := min(len(m.requests), len(m.answers)-1)
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	words := strings.SplitAfter(m.answers[i], " ")
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		for _, w := range words {
			if m.delay > 0 {
				select {
				case <-time.After(m.delay):
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- llm.Token{Text: w}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- llm.Token{Done: true, Usage: &llm.Usage{CompletionTokens: len(words)}}:
		case <-ctx.Done():
		}
	}()
	return out, nil
}

func (m *scriptedModel) lastRequest() llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) == 0 {
		return llm.Request{}
	}
	return m.requests[len(m.requests)-1]
}

var (
	enginesOnce sync.Once
	engineASR   *asrsphinx.Recognizer
	engineTTS   *ttsflite.Synthesizer
	enginesErr  error
)

func engines(t testing.TB) (*asrsphinx.Recognizer, *ttsflite.Synthesizer) {
	t.Helper()
	enginesOnce.Do(func() {
		engineASR, enginesErr = asrsphinx.New(asrsphinx.DefaultConfig())
		if enginesErr == nil {
			engineTTS, enginesErr = ttsflite.New(ttsflite.DefaultConfig())
		}
	})
	if enginesErr != nil {
		t.Skipf("engines unavailable (requires cgo, pocketsphinx-en-us and flite1-dev): %v", enginesErr)
	}
	return engineASR, engineTTS
}

// countObserver counts traced turns.
type countObserver struct {
	mu     sync.Mutex
	traces []pipeline.Trace
}

func (o *countObserver) TurnTraced(tr pipeline.Trace) {
	o.mu.Lock()
	o.traces = append(o.traces, tr)
	o.mu.Unlock()
}
func (o *countObserver) FrameDropped(string) {}

type testServer struct {
	h        *Handler
	http     *httptest.Server
	model    *scriptedModel
	obs      *countObserver
	active   atomic.Int32
	rejected sync.Map // code → *atomic.Int32
	cancel   context.CancelFunc
}

func (ts *testServer) wsURL() string {
	return "ws" + strings.TrimPrefix(ts.http.URL, "http") + ts.h.cfg.WSPath
}

func (ts *testServer) rejectedCount(code string) int {
	v, ok := ts.rejected.Load(code)
	if !ok {
		return 0
	}
	return int(v.(*atomic.Int32).Load())
}

// newTestServer serves the device endpoints on real ASR and TTS engines
// and a scripted LLM; edit adjusts the config.
func newTestServer(t testing.TB, answers []string, edit func(*Config, *pipeline.Config)) *testServer {
	t.Helper()
	asrEngine, _ := engines(t)
	return newTestServerASR(t, asrEngine, answers, edit)
}

// newTestServerASR is newTestServer recognising with rec.
func newTestServerASR(t testing.TB, rec asr.Recognizer, answers []string, edit func(*Config, *pipeline.Config)) *testServer {
	t.Helper()
	_, ttsEngine := engines(t)
	if len(answers) == 0 {
		answers = []string{"It is sunny today."}
	}
	ts := &testServer{model: &scriptedModel{answers: answers}, obs: &countObserver{}}
	cfg := DefaultConfig()
	pc := pipeline.DefaultConfig()
	pc.SystemPrompt = "You are a test."
	if edit != nil {
		edit(&cfg, &pc)
	}
	base, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	var wg sync.WaitGroup
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	h, err := New(cfg, Host{
		Backends: pipeline.Backends{ASR: rec, LLM: ts.model, TTS: ttsEngine},
		Pipeline: pc,
		Observer: ts.obs,
		Reserve: func() (func(), string) {
			wg.Add(1)
			return wg.Done, ""
		},
		Track: func(func()) (func(), bool) {
			ts.active.Add(1)
			return func() { ts.active.Add(-1) }, true
		},
		Base: base,
		Log:  log,
		Rejected: func(code string) {
			v, _ := ts.rejected.LoadOrStore(code, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
		},
		Dropped:       func(string) {},
		OpusBitrate:   24000,
		MaxFrameBytes: 4096,
		IdleTimeout:   30 * time.Second,
		WriteTimeout:  10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.h = h
	mux := http.NewServeMux()
	h.Mount(mux)
	ts.http = httptest.NewServer(mux)
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		ts.http.Close()
	})
	return ts
}

// waitIdle waits until no device connection is left.
func (ts *testServer) waitIdle(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ts.active.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d device connections still active", ts.active.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		// The shared recogniser refills its decoder pool in the background
		// after a session took one: that build is the pool's, not a leak.
		if engineASR != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = engineASR.WaitReady(ctx)
		}
		goleak.VerifyNone(t, opt)
	})
}

// speak synthesizes text with flite at 16 kHz.
func speak(t testing.TB, synth tts.Synthesizer, text string) []int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := make(chan tts.Chunk, 64)
	errc := make(chan error, 1)
	go func() {
		errc <- synth.Synthesize(ctx, text, ch)
		close(ch)
	}()
	var pcm []int16
	for c := range ch {
		pcm = append(pcm, c.PCM...)
	}
	if err := <-errc; err != nil {
		t.Fatalf("synthesize %q: %v", text, err)
	}
	if synth.SampleRate() != 16000 {
		t.Fatalf("flite speaks %d Hz, the test wants 16000", synth.SampleRate())
	}
	return pcm
}
