package pipeline

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tts"
)

// Test doubles of the three backends. Real engines are covered by their own
// packages' tests and by the web end-to-end test; these make the session's
// timing and text deterministic.

// fakeASR returns a fixed transcript for each utterance once at least
// minFrames 20 ms frames were written (fewer: "", i.e. noise). Transcripts
// are used in order; the last one repeats.
type fakeASR struct {
	mu          sync.Mutex
	transcripts []string
	minFrames   int
	// writeGate, when set, makes every Write wait for a value (a slow ASR).
	writeGate chan struct{}
	// writeDelay, when set, makes every Write take this long per 20 ms of
	// audio (a recogniser slower than real time).
	writeDelay time.Duration
	// startDelay, when set, makes every Start take this long (a decoder
	// loaded on demand, a remote handshake).
	startDelay time.Duration
	// failAfter, when > 0, makes every Start after that many fail.
	failAfter int
	started   int
	written   int   // samples written to all streams
	closed    []int // samples each closed stream was given, in order
}

func (f *fakeASR) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate != asrRate {
		return nil, asr.ErrSampleRate
	}
	f.mu.Lock()
	delay := f.startDelay
	f.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAfter > 0 && f.started >= f.failAfter {
		return nil, errors.New("fake asr: no decoder")
	}
	text := ""
	if len(f.transcripts) > 0 {
		text = f.transcripts[0]
		if len(f.transcripts) > 1 {
			f.transcripts = f.transcripts[1:]
		}
	}
	f.started++
	return &fakeStream{ctx: ctx, text: text, need: f.minFrames * asrRate * frameMs / 1000,
		gate: f.writeGate, delay: f.writeDelay, rec: f, results: make(chan asr.Result, 4)}, nil
}

type fakeStream struct {
	ctx     context.Context
	text    string
	need    int
	samples int
	partial bool
	closed  bool
	gate    chan struct{}
	delay   time.Duration
	rec     *fakeASR
	results chan asr.Result
}

func (s *fakeStream) Write(pcm []int16) error {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	if s.delay > 0 {
		time.Sleep(s.delay * time.Duration(len(pcm)) / time.Duration(asrRate*frameMs/1000))
	}
	s.samples += len(pcm)
	s.rec.mu.Lock()
	s.rec.written += len(pcm)
	s.rec.mu.Unlock()
	if !s.partial && s.samples >= s.need && s.text != "" {
		s.partial = true
		select { // partials are dropped rather than block, as the contract says
		case s.results <- asr.Result{Text: strings.Fields(s.text)[0], At: time.Now()}:
		default:
		}
	}
	return nil
}

func (s *fakeStream) Results() <-chan asr.Result { return s.results }

func (s *fakeStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.rec.mu.Lock()
	s.rec.closed = append(s.rec.closed, s.samples)
	s.rec.mu.Unlock()
	text := s.text
	if s.samples < s.need {
		text = ""
	}
	s.results <- asr.Result{Text: text, Final: true, At: time.Now()}
	close(s.results)
	return nil
}

// llmScript is one scripted answer.
type llmScript struct {
	tokens   []string
	failAt   int            // index of the token replaced by an error; -1: none
	err      error          // the error (default errScripted)
	startErr error          // returned by Stream itself
	hang     bool           // after the tokens, wait for ctx instead of Done
	calls    []llm.ToolCall // tool calls, on the Done token
}

var errScripted = errors.New("scripted backend failure")

func answer(text string) llmScript {
	var toks []string
	for i, w := range strings.SplitAfter(text, " ") {
		if i > 0 && w != "" {
			toks[len(toks)-1] = strings.TrimSuffix(toks[len(toks)-1], " ")
			w = " " + w
		}
		toks = append(toks, w)
	}
	if n := len(toks); n > 0 && toks[n-1] == "" {
		toks = toks[:n-1]
	}
	return llmScript{tokens: toks, failAt: -1}
}

// scriptedLLM plays scripts in order (the last repeats) and records requests.
type scriptedLLM struct {
	mu      sync.Mutex
	scripts []llmScript
	reqs    []llm.Request
	wg      sync.WaitGroup
	// usage, when set, gives the Usage of the Done token (a cache model).
	usage func(llm.Request) llm.Usage
}

func (m *scriptedLLM) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	sc := m.scripts[0]
	if len(m.scripts) > 1 {
		m.scripts = m.scripts[1:]
	}
	m.reqs = append(m.reqs, req)
	usage := llm.Usage{CompletionTokens: len(sc.tokens)}
	if m.usage != nil {
		usage = m.usage(req)
		usage.CompletionTokens = len(sc.tokens)
	}
	m.mu.Unlock()
	if sc.startErr != nil {
		return nil, sc.startErr
	}
	ch := make(chan llm.Token)
	m.wg.Go(func() {
		defer close(ch)
		send := func(tok llm.Token) bool {
			select {
			case ch <- tok:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for i, text := range sc.tokens {
			if i == sc.failAt {
				err := sc.err
				if err == nil {
					err = errScripted
				}
				send(llm.Token{Err: err})
				return
			}
			if !send(llm.Token{Text: text}) {
				return
			}
		}
		if sc.hang {
			<-ctx.Done()
			return
		}
		send(llm.Token{Done: true, Usage: &usage, ToolCalls: sc.calls})
	})
	return ch, nil
}

func (m *scriptedLLM) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

// toneTTS speaks every word as wordMs of a tone, one Chunk per word with a
// WordMark at the word's end (punctuation after it belongs to no word).
type toneTTS struct {
	rate   int
	wordMs int
	failOn string // Synthesize fails for a text containing this
	leadMs int    // silence sent before each text's first word
	mu     sync.Mutex
	texts  []string
}

func (f *toneTTS) SampleRate() int { return f.rate }

func (f *toneTTS) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	f.mu.Lock()
	f.texts = append(f.texts, text)
	f.mu.Unlock()
	if f.failOn != "" && strings.Contains(text, f.failOn) {
		return errScripted
	}
	per := f.rate * f.wordMs / 1000
	pos, samples := 0, 0
	if f.leadMs > 0 {
		samples = f.rate * f.leadMs / 1000
		select {
		case out <- tts.Chunk{PCM: make([]int16, samples)}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, w := range strings.Fields(text) {
		start := pos + strings.Index(text[pos:], w)
		pos = start + len(w)
		end := start + len(strings.TrimRight(w, ".,!?;:"))
		samples += per
		c := tts.Chunk{PCM: tone(per, f.rate, 300, 6000), Words: []tts.WordMark{{TextEnd: end, EndSample: samples}}}
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// tone returns n samples of a sine wave.
func tone(n, rate int, hz float64, amp float64) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pcm[i] = int16(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return pcm
}

// recObserver records what the session observed.
type recObserver struct {
	mu       sync.Mutex
	traces   []Trace
	drops    map[string]int
	buffered int
	limited  int            // TurnLimited calls
	specs    map[string]int // SpeculationEnded calls by result
	finals   map[string]int // PauseFinalEnded calls by result
	replayed time.Duration
}

func (o *recObserver) PauseFinalEnded(result string, replayed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.finals == nil {
		o.finals = map[string]int{}
	}
	o.finals[result]++
	o.replayed += replayed
}

func (o *recObserver) SpeculationEnded(result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.specs == nil {
		o.specs = map[string]int{}
	}
	o.specs[result]++
}

func (o *recObserver) speculations(result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.specs[result]
}

func (o *recObserver) TurnLimited() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limited++
}

func (o *recObserver) TurnTraced(t Trace) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.traces = append(o.traces, t)
}

func (o *recObserver) FrameDropped(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.drops == nil {
		o.drops = map[string]int{}
	}
	o.drops[reason]++
}

func (o *recObserver) ASRFramesBuffered(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buffered += n
}

func (o *recObserver) snapshot() ([]Trace, map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := map[string]int{}
	for k, v := range o.drops {
		d[k] = v
	}
	return append([]Trace(nil), o.traces...), d
}

// harness runs one session and collects its output.
type harness struct {
	t      *testing.T
	cfg    Config
	s      *Session
	llm    *scriptedLLM
	tts    *toneTTS
	obs    *recObserver
	in     chan Input
	got    chan Output
	runErr chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
	speech []int16 // 20 ms of speech at InputRate
	quiet  []int16 // 20 ms of silence at InputRate
}

// harnessLog is the sessions' logger (a test may set it, then reset it).
var harnessLog = zerolog.Nop()

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.InputRate = 16000
	cfg.OutputRate = 48000
	cfg.SystemPrompt = "You are terse."
	cfg.BargeIn = true
	cfg.BargeInMinSpeechMs = 200
	cfg.PlaybackReportTimeout = 500 * time.Millisecond
	cfg.OutputLeadMs = 100
	cfg.MaxHistoryMessages = 20
	return cfg
}

func newHarness(t *testing.T, cfg Config, a *fakeASR, m *scriptedLLM, s *toneTTS) *harness {
	t.Helper()
	return newHarnessModel(t, cfg, a, m, m, s)
}

// newHarnessModel runs the session on model, which plays m's scripts (a
// wrapper of m, or m itself).
func newHarnessModel(t *testing.T, cfg Config, a asr.Recognizer, model llm.Model, m *scriptedLLM, s *toneTTS) *harness {
	t.Helper()
	h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
	sess, err := NewSession("test", cfg, Backends{ASR: a, LLM: model, TTS: s}, h.obs, harnessLog)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return h.start(sess, m)
}

// start runs sess, whose LLM plays m's scripts.
func (h *harness) start(sess *Session, m *scriptedLLM) *harness {
	t, cfg := h.t, h.cfg
	h.s = sess
	n := cfg.InputRate * frameMs / 1000
	h.speech = tone(n, cfg.InputRate, 220, 8000)
	h.quiet = make([]int16, n)
	h.in = make(chan Input)
	out := make(chan Output)
	h.got = make(chan Output, 100000)
	h.runErr = make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	done := make(chan struct{})
	t.Cleanup(func() { // also after a failed test: leave no goroutine behind
		cancel()
		h.wg.Wait()
		m.wg.Wait()
	})
	h.wg.Go(func() {
		defer close(done)
		h.runErr <- sess.Run(ctx, h.in, out)
	})
	h.wg.Go(func() {
		for {
			select {
			case o := <-out:
				h.got <- o
			case <-done:
				return
			}
		}
	})
	return h
}

// audio sends ms of speech or silence in 20 ms messages at real-time pace
// (in the bubble's fake time).
func (h *harness) audio(speech bool, ms int) {
	h.t.Helper()
	frame := h.quiet
	if speech {
		frame = h.speech
	}
	for i := 0; i < ms/frameMs; i++ {
		h.send(Input{Audio: append([]int16(nil), frame...)})
		time.Sleep(frameDur)
	}
}

func (h *harness) send(in Input) {
	h.t.Helper()
	select {
	case h.in <- in:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("session does not read its input")
	}
}

func (h *harness) client(ev ClientEvent) { h.send(Input{Event: &ev}) }

// utterance says something the VAD takes for one utterance and ends it.
func (h *harness) utterance() {
	h.audio(false, 200)
	h.audio(true, 400)
	h.audio(false, h.cfg.VAD.EndSilenceMs+100)
}

// until reads output until stop returns true for one, and returns all read.
func (h *harness) until(what string, stop func(Output) bool) []Output {
	h.t.Helper()
	var seen []Output
	timeout := time.After(60 * time.Second)
	for {
		select {
		case o := <-h.got:
			seen = append(seen, o)
			if stop(o) {
				return seen
			}
		case <-timeout:
			h.t.Fatalf("no %s within 60 s of session time; saw %s", what, summarize(seen))
		}
	}
}

// untilAll reads output until it has seen an event of every type given.
func (h *harness) untilAll(types ...string) []Output {
	h.t.Helper()
	want := map[string]bool{}
	for _, typ := range types {
		want[typ] = true
	}
	return h.until(strings.Join(types, " and "), func(o Output) bool {
		if o.Event != nil {
			delete(want, o.Event.Type)
		}
		return len(want) == 0
	})
}

// frames reads output until n audio frames have come.
func (h *harness) frames(n int) []Output {
	h.t.Helper()
	count := 0
	return h.until(strconv.Itoa(n)+" frames", func(o Output) bool {
		if o.Audio != nil {
			count++
		}
		return count == n
	})
}

func isEvent(typ string) func(Output) bool {
	return func(o Output) bool { return o.Event != nil && o.Event.Type == typ }
}

// drain returns whatever output is waiting once the session is idle.
func (h *harness) drain() []Output {
	var seen []Output
	for {
		select {
		case o := <-h.got:
			seen = append(seen, o)
		default:
			return seen
		}
	}
}

// close ends the session by closing in and checks Run's result.
func (h *harness) close() {
	h.t.Helper()
	close(h.in)
	if err := <-h.runErr; err != nil {
		h.t.Errorf("Run after in closed: %v, want nil", err)
	}
	h.cancel()
	h.wg.Wait()
	h.llm.wg.Wait()
}

func summarize(outs []Output) string {
	var b strings.Builder
	frames := 0
	flush := func() {
		if frames > 0 {
			b.WriteString(" [" + strconv.Itoa(frames) + " frames]")
			frames = 0
		}
	}
	for _, o := range outs {
		if o.Audio != nil {
			frames++
			continue
		}
		flush()
		b.WriteString(" " + o.Event.Type)
		if o.Event.Text != "" {
			b.WriteString("(" + o.Event.Text + ")")
		}
		if o.Event.Code != "" {
			b.WriteString("(" + o.Event.Code + ": " + o.Event.Message + ")")
		}
	}
	flush()
	return b.String()
}

func events(outs []Output, typ string) []*Event {
	var evs []*Event
	for _, o := range outs {
		if o.Event != nil && o.Event.Type == typ {
			evs = append(evs, o.Event)
		}
	}
	return evs
}

func audioFrames(outs []Output) int {
	n := 0
	for _, o := range outs {
		if o.Audio != nil {
			n++
		}
	}
	return n
}
