package pipeline

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/llm"
)

// partialASR plays one script per utterance (the last repeats): partials
// that appear once enough audio was written, then the final on Close.
type partialASR struct {
	mu      sync.Mutex
	scripts []asrScript
}

type asrScript struct {
	partials []timedPartial
	final    string
}

// timedPartial appears after frames 20 ms frames of the utterance's audio.
type timedPartial struct {
	frames int
	text   string
}

func (f *partialASR) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate != asrRate {
		return nil, asr.ErrSampleRate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := f.scripts[0]
	if len(f.scripts) > 1 {
		f.scripts = f.scripts[1:]
	}
	return &partialStream{script: sc, results: make(chan asr.Result, len(sc.partials)+1)}, nil
}

type partialStream struct {
	script  asrScript
	samples int
	next    int // index of the next partial to deliver
	closed  bool
	results chan asr.Result
}

func (s *partialStream) Write(pcm []int16) error {
	s.samples += len(pcm)
	frames := s.samples / (asrRate * frameMs / 1000)
	for s.next < len(s.script.partials) && frames >= s.script.partials[s.next].frames {
		s.results <- asr.Result{Text: s.script.partials[s.next].text, At: time.Now()}
		s.next++
	}
	return nil
}

func (s *partialStream) Results() <-chan asr.Result { return s.results }

func (s *partialStream) Close() error {
	if !s.closed {
		s.closed = true
		s.results <- asr.Result{Text: s.script.final, Final: true, At: time.Now()}
		close(s.results)
	}
	return nil
}

// prefillMode says how prefillLLM's Prefill behaves.
type prefillMode int

const (
	prefillFast  prefillMode = iota // processes the prompt at once
	prefillBlock                    // runs until its ctx ends, processing nothing
	prefillBusy                     // returns llm.ErrBusy
)

// prefillLLM is a scriptedLLM with a cache model and Prefill. A request's
// tokens are its messages' roles and words (wordTokens); like the engine it
// keeps one token sequence per conversation and reuses the longest common
// prefix, so Usage.CachedTokens means what it means for the real engine.
type prefillLLM struct {
	*scriptedLLM
	mode prefillMode

	cmu      sync.Mutex // guards the fields below
	cache    map[string][]string
	prefills []prefillCall
	// liveAtStream counts, per Stream, the prefill contexts not yet
	// cancelled when it was called.
	liveAtStream []int
}

type prefillCall struct {
	req       llm.Request
	ctx       context.Context
	processed int
	err       error
}

var _ llm.Prefiller = (*prefillLLM)(nil)

func newPrefillLLM(mode prefillMode, scripts ...llmScript) *prefillLLM {
	m := &prefillLLM{scriptedLLM: &scriptedLLM{scripts: scripts}, mode: mode, cache: map[string][]string{}}
	m.usage = m.streamUsage
	return m
}

func wordTokens(msgs []llm.Message) []string {
	var toks []string
	for _, msg := range msgs {
		toks = append(toks, "<"+msg.Role+">")
		toks = append(toks, strings.Fields(msg.Content)...)
		toks = append(toks, "<end>")
	}
	return append(toks, "<assistant>") // the generation prompt
}

// fill makes conv's cache hold prompt and returns how many tokens it reused.
func (m *prefillLLM) fill(conv string, prompt []string) int {
	old := m.cache[conv]
	cached := 0
	for cached < min(len(old), len(prompt)) && old[cached] == prompt[cached] {
		cached++
	}
	if cached == len(prompt) {
		cached-- // the last token runs again for its logits
	}
	m.cache[conv] = prompt
	return cached
}

func (m *prefillLLM) streamUsage(req llm.Request) llm.Usage {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	live := 0
	for _, c := range m.prefills {
		if c.ctx.Err() == nil {
			live++
		}
	}
	m.liveAtStream = append(m.liveAtStream, live)
	prompt := wordTokens(req.Messages)
	return llm.Usage{PromptTokens: len(prompt), CachedTokens: m.fill(req.Conversation, prompt)}
}

func (m *prefillLLM) Prefill(ctx context.Context, req llm.Request) (int, error) {
	m.cmu.Lock()
	i := len(m.prefills)
	m.prefills = append(m.prefills, prefillCall{req: req, ctx: ctx})
	m.cmu.Unlock()
	var processed int
	var err error
	switch m.mode {
	case prefillFast:
		m.cmu.Lock()
		prompt := wordTokens(req.Messages)
		processed = len(prompt) - m.fill(req.Conversation, prompt)
		m.cmu.Unlock()
	case prefillBlock:
		<-ctx.Done()
		err = ctx.Err()
	case prefillBusy:
		err = llm.ErrBusy
	}
	m.cmu.Lock()
	m.prefills[i].processed, m.prefills[i].err = processed, err
	m.cmu.Unlock()
	return processed, err
}

func (m *prefillLLM) calls() ([]prefillCall, []int) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	return slices.Clone(m.prefills), slices.Clone(m.liveAtStream)
}

func earlyConfig() Config {
	cfg := testConfig()
	cfg.EarlyStart = EarlyStartAuto
	cfg.EarlyStartStableMs = 150
	return cfg
}

// speak sends an utterance: 200 ms of silence, speechMs of speech, then
// silence until the VAD ends it.
func (h *harness) speak(speechMs int) {
	h.audio(false, 200)
	h.audio(true, speechMs)
	h.audio(false, h.cfg.VAD.EndSilenceMs+100)
}

// checkPrefillReq asserts that a prefill asked exactly what the final
// request asked, with the partial as the user's words.
func checkPrefillReq(t *testing.T, got, final llm.Request, partial string) {
	t.Helper()
	want := final
	want.Messages = slices.Clone(final.Messages)
	want.Messages[len(want.Messages)-1].Content = partial
	if got.Conversation != want.Conversation || got.MaxTokens != want.MaxTokens ||
		got.Temperature != want.Temperature || !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Errorf("prefill request\nhave %+v\nwant %+v", got, want)
	}
}

// TestEarlyStartStablePartial: a partial that stays unchanged is prefilled
// once, with the request the final makes, and the final reuses it. The
// second utterance's prefill carries the first exchange: it waited for the
// history to settle.
func TestEarlyStartStablePartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{
			// "what" is replaced after 40 ms, so it is never stable.
			{partials: []timedPartial{{5, "what"}, {7, "what time"}}, final: "what time is it"},
			{partials: []timedPartial{{5, "and"}, {7, "and the date"}}, final: "and the date"},
		}}
		m := newPrefillLLM(prefillFast, answer("Noon."), answer("Monday."))
		h := newHarnessModel(t, earlyConfig(), a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(400)
		first := h.until("first trace", isEvent(EventTrace))
		h.speak(400)
		second := h.until("second trace", isEvent(EventTrace))
		synctest.Wait()

		calls, live := m.calls()
		reqs := m.requests()
		if len(calls) != 2 || len(reqs) != 2 {
			t.Fatalf("%d prefills and %d requests, want 2 and 2", len(calls), len(reqs))
		}
		checkPrefillReq(t, calls[0].req, reqs[0], "what time")
		checkPrefillReq(t, calls[1].req, reqs[1], "and the date")
		if !slices.Equal(live, []int{0, 0}) {
			t.Errorf("prefills still running when each final request was sent: %v, want none", live)
		}
		// Turn 1: system, user and the template's tokens. The prefill ran
		// 10 ("what time" plus the closing tokens); the final reused 8 and
		// computed "is it" and the closing tokens.
		tr := events(first, EventTrace)[0]
		if tr.PromptTokens != 12 || tr.CachedTokens != 8 || tr.EarlyTokens != 10 {
			t.Errorf("turn 1 trace tokens: prompt %d, cached %d, early %d; want 12, 8, 10", tr.PromptTokens, tr.CachedTokens, tr.EarlyTokens)
		}
		if _, ok := tr.Marks[MarkLLMPrefillEarly]; !ok {
			t.Errorf("turn 1 trace lacks %s: %v", MarkLLMPrefillEarly, tr.Marks)
		}
		// Turn 2 reuses everything: the final equals the prefilled partial.
		tr = events(second, EventTrace)[0]
		if tr.CachedTokens != tr.PromptTokens-1 || tr.EarlyTokens == 0 {
			t.Errorf("turn 2 trace tokens: prompt %d, cached %d, early %d; want all but the last cached", tr.PromptTokens, tr.CachedTokens, tr.EarlyTokens)
		}
		if errs := events(append(first, second...), EventError); len(errs) != 0 {
			t.Errorf("error events: %s", summarize(append(first, second...)))
		}
		h.close()
	})
}

// TestEarlyStartReplacedAndCancelled: a newer stable partial cancels the
// running prefill and starts its own; the final cancels that one before the
// final request is sent, and the turn goes on as usual.
func TestEarlyStartReplacedAndCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{
			{partials: []timedPartial{{16, "what"}, {30, "what time"}}, final: "what time is it"},
		}}
		m := newPrefillLLM(prefillBlock, answer(twoSentences))
		h := newHarnessModel(t, earlyConfig(), a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(600)
		outs := h.until("trace", isEvent(EventTrace))
		synctest.Wait()

		calls, live := m.calls()
		if len(calls) != 2 || calls[0].req.Messages[1].Content != "what" || calls[1].req.Messages[1].Content != "what time" {
			t.Fatalf("prefills %+v, want one for %q then one for %q", calls, "what", "what time")
		}
		for i, c := range calls {
			if !errors.Is(c.err, context.Canceled) {
				t.Errorf("prefill %d ended with %v, want it cancelled", i, c.err)
			}
		}
		if !slices.Equal(live, []int{0}) {
			t.Errorf("prefills still running when the final request was sent: %v, want none", live)
		}
		var text strings.Builder
		for _, e := range events(outs, EventAnswer) {
			text.WriteString(e.Text)
		}
		if text.String() != twoSentences || len(events(outs, EventError)) != 0 {
			t.Errorf("turn output %s, want the whole answer and no error", summarize(outs))
		}
		h.close()
	})
}

// TestEarlyStartBusyIgnored: a backend too busy to prefill changes nothing
// for the turn.
func TestEarlyStartBusyIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{{partials: []timedPartial{{5, "what time"}}, final: "what time is it"}}}
		m := newPrefillLLM(prefillBusy, answer(twoSentences))
		h := newHarnessModel(t, earlyConfig(), a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(400)
		outs := h.until("trace", isEvent(EventTrace))
		synctest.Wait()
		calls, _ := m.calls()
		if len(calls) != 1 || !errors.Is(calls[0].err, llm.ErrBusy) {
			t.Fatalf("prefills %+v, want one refused as busy", calls)
		}
		if n := audioFrames(outs); n != 40 || len(events(outs, EventError)) != 0 {
			t.Errorf("turn output %s, want 40 frames and no error", summarize(outs))
		}
		if tr := events(outs, EventTrace)[0]; tr.EarlyTokens != 0 || tr.CachedTokens != 0 || tr.PromptTokens != 12 {
			t.Errorf("trace tokens: prompt %d, cached %d, early %d; want 12, 0, 0", tr.PromptTokens, tr.CachedTokens, tr.EarlyTokens)
		}
		h.close()
	})
}

// TestEarlyStartOff: with early start off the model is never asked to
// prefill and the final request computes the user's words itself.
func TestEarlyStartOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{{partials: []timedPartial{{5, "what time"}}, final: "what time is it"}}}
		m := newPrefillLLM(prefillFast, answer("Noon."))
		cfg := earlyConfig()
		cfg.EarlyStart = EarlyStartOff
		h := newHarnessModel(t, cfg, a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(400)
		outs := h.until("trace", isEvent(EventTrace))
		synctest.Wait()
		if calls, _ := m.calls(); len(calls) != 0 {
			t.Errorf("%d prefills with early start off, want none", len(calls))
		}
		tr := events(outs, EventTrace)[0]
		if tr.PromptTokens != 12 || tr.CachedTokens != 0 || tr.EarlyTokens != 0 {
			t.Errorf("trace tokens: prompt %d, cached %d, early %d; want 12, 0, 0", tr.PromptTokens, tr.CachedTokens, tr.EarlyTokens)
		}
		if _, ok := tr.Marks[MarkLLMPrefillEarly]; ok {
			t.Errorf("trace has %s with early start off", MarkLLMPrefillEarly)
		}
		h.close()
	})
}

// TestEarlyStartSessionEnd: a prefill running when the session ends is
// cancelled and nothing is left behind (TestMain checks for leaks).
func TestEarlyStartSessionEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{{partials: []timedPartial{{5, "what time"}}, final: "what time is it"}}}
		m := newPrefillLLM(prefillBlock, answer("Noon."))
		h := newHarnessModel(t, earlyConfig(), a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.audio(false, 200)
		h.audio(true, 600) // still speaking
		synctest.Wait()
		if calls, _ := m.calls(); len(calls) != 1 || calls[0].ctx.Err() != nil {
			t.Fatalf("prefills %+v, want one running", calls)
		}
		h.close()
		calls, _ := m.calls()
		if !errors.Is(calls[0].err, context.Canceled) {
			t.Errorf("prefill ended with %v after the session ended, want it cancelled", calls[0].err)
		}
	})
}

func TestEarlyStartConfig(t *testing.T) {
	plain := &scriptedLLM{scripts: []llmScript{answer("x")}}
	pre := newPrefillLLM(prefillFast, answer("x"))
	for _, c := range []struct {
		mode    EarlyStart
		stable  int
		model   llm.Model
		wantOn  bool
		wantErr bool
	}{
		{EarlyStartAuto, 150, pre, true, false},
		{EarlyStartAuto, 150, plain, false, false},
		{"", 150, pre, true, false},
		{EarlyStartOn, 0, pre, true, false},
		{EarlyStartOn, 150, plain, false, true},
		{EarlyStartOff, 150, pre, false, false},
		{"sometimes", 150, pre, false, true},
		{EarlyStartAuto, -1, pre, false, true},
	} {
		cfg := earlyConfig()
		cfg.EarlyStart, cfg.EarlyStartStableMs = c.mode, c.stable
		s, err := NewSession("x", cfg, Backends{ASR: &fakeASR{}, LLM: c.model, TTS: &toneTTS{rate: 16000}}, nil, zerolog.Nop())
		if c.wantErr {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%q, stable %d ms, %T: err %v, want ErrConfig", c.mode, c.stable, c.model, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q, %T: %v", c.mode, c.model, err)
			continue
		}
		if on := s.prefiller != nil; on != c.wantOn {
			t.Errorf("%q, %T: early start on = %v, want %v", c.mode, c.model, on, c.wantOn)
		}
	}
}

// TestEarlyStartWaitsForTheTurn: a partial that becomes stable while the
// previous answer still plays is prefilled only once that turn is settled,
// with its answer in the history, as the final request will have it.
func TestEarlyStartWaitsForTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{
			{partials: []timedPartial{{16, "count"}}, final: "count to eight"},
			{partials: []timedPartial{{16, "and then"}}, final: "and then"},
		}}
		m := newPrefillLLM(prefillFast, answer(twoSentences), answer("Done."))
		cfg := earlyConfig()
		cfg.BargeIn = false // the person talks over the answer without cutting it
		h := newHarnessModel(t, cfg, a, m, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(400)
		h.audio(true, 1600) // starts while turn 1's 800 ms of audio play
		first := h.until("first trace", isEvent(EventTrace))
		h.audio(false, cfg.VAD.EndSilenceMs+100)
		h.until("second trace", isEvent(EventTrace))
		synctest.Wait()

		calls, _ := m.calls()
		reqs := m.requests()
		if len(calls) != 2 || len(reqs) != 2 {
			t.Fatalf("%d prefills and %d requests, want 2 and 2", len(calls), len(reqs))
		}
		checkPrefillReq(t, calls[0].req, reqs[0], "count")
		checkPrefillReq(t, calls[1].req, reqs[1], "and then")
		if n := len(events(first, EventAnswer)); n == 0 {
			t.Fatalf("no answer for turn 1: %s", summarize(first))
		}
		h.close()
	})
}
