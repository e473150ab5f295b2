package pipeline

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
	"github.com/voxpipe/voxpipe/tools"
)

func cacheBackends() (Backends, *answercache.Cache) {
	c := answercache.New(answercache.Config{MaxEntries: 100, MaxAudioBytes: 10 << 20})
	return Backends{Answers: &AnswerCache{Cache: c, Scope: answercache.Scope{Model: "test"}}}, c
}

// turnAudio is the PCM of the frames in outs, joined.
func turnAudio(outs []Output) []int16 {
	var pcm []int16
	for _, o := range outs {
		pcm = append(pcm, o.Audio...)
	}
	return pcm
}

// TestCacheHitReplaysAudio: a paraphrase of an answered question is
// answered from the cache: the same text and the same audio samples, with
// neither the LLM nor the TTS called, a trace that says hit, and the
// answer in the history.
func TestCacheHitReplaysAudio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, c := cacheBackends()
		h := newToolHarness(t, testConfig(), be,
			[]string{"what is the capital of france", "tell me the capital of france"},
			answer("Paris is the capital. It is on the Seine."), answer("The LLM ran again."))
		h.utterance()
		first := h.until("trace event", isEvent(EventTrace))
		if tr := events(first, EventTrace)[0]; tr.Cache != CacheMiss {
			t.Errorf("first turn's trace cache = %q, want miss", tr.Cache)
		}
		time.Sleep(time.Second) // the tail passes and the answer is stored
		if st := c.Stats(); st.Entries != 1 || st.AudioBytes == 0 {
			t.Fatalf("after the first turn the cache holds %+v, want one answer with audio", st)
		}
		synths := len(h.tts.texts)

		h.utterance()
		second := h.until("trace event", isEvent(EventTrace))
		tr := events(second, EventTrace)[0]
		if tr.Cache != CacheHit {
			t.Errorf("second turn's trace cache = %q, want hit", tr.Cache)
		}
		if n := len(h.llm.requests()); n != 1 {
			t.Errorf("the LLM got %d requests, want 1 (the hit needs none)", n)
		}
		if n := len(h.tts.texts); n != synths {
			t.Errorf("the TTS synthesised %d texts on the hit, want none", n-synths)
		}
		if got := answerText(second); got != "Paris is the capital. It is on the Seine." {
			t.Errorf("hit's answer events give %q", got)
		}
		a, b := turnAudio(first), turnAudio(second)
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("hit's audio: %d samples, the miss's %d; want the same samples", len(b), len(a))
		}
		if _, ok := tr.Marks[MarkLLMRequest]; ok {
			t.Error("the hit's trace has llm_request")
		}
		if tr.HeardMs == nil {
			t.Error("the hit's trace has no heard_ms")
		}
		time.Sleep(time.Second)
		hist := h.s.History()
		if last := hist[len(hist)-1]; last.Role != llm.RoleAssistant || last.Content != "Paris is the capital. It is on the Seine." {
			t.Errorf("history ends with %+v, want the cached answer", last)
		}
		h.close()
	})
}

// TestCacheBypass: a question that refers to the conversation, or to the
// time, is not looked up (trace cache off, with the reason), and an
// answer that called a tool is not stored.
func TestCacheBypass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, c := cacheBackends()
		clock := &fakeTool{name: "get_weather", result: "Sunny.", delay: 10 * time.Millisecond}
		be.Tools = []tools.Provider{tools.Static{clock}}
		call := answer("Let me see.")
		call.calls = []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{}`}}
		h := newToolHarness(t, testConfig(), be,
			[]string{"what is the capital of spain", "what about france", "what time is it", "how warm is madrid"},
			answer("Madrid."), answer("Paris."), answer("Noon."), call, answer("Warm."))
		want := []struct{ cache, bypass string }{
			{CacheMiss, ""}, {CacheOff, answercache.ReasonContext}, {CacheOff, answercache.ReasonTime}, {CacheMiss, ""},
		}
		for i, w := range want {
			h.utterance()
			tr := events(h.until("trace event", isEvent(EventTrace)), EventTrace)[0]
			if tr.Cache != w.cache || tr.CacheBypass != w.bypass {
				t.Errorf("turn %d: cache %q bypass %q, want %q %q", i+1, tr.Cache, tr.CacheBypass, w.cache, w.bypass)
			}
			time.Sleep(time.Second)
		}
		if st := c.Stats(); st.Entries != 1 {
			t.Errorf("the cache holds %d answers, want 1 (the tool turn's is not stored)", st.Entries)
		}
		h.close()
	})
}

// TestCachePreload: preloaded questions are answered from the cache from
// the first turn; a question the cache bypasses is not preloaded.
func TestCachePreload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, c := cacheBackends()
		cfg := testConfig()
		_, m, s := newBackends(nil, answer("I can answer questions."), answer("Twelve."))
		be.LLM, be.TTS = m, s
		n, err := be.Answers.Preload(t.Context(), be, cfg, []string{"what can you do", "what time is it"})
		if err != nil || n != 1 {
			t.Fatalf("Preload = %d, %v; want 1 stored (the time question is bypassed)", n, err)
		}
		if reqs := m.requests(); len(reqs) != 1 || reqs[0].Messages[0].Content != cfg.SystemPrompt {
			t.Fatalf("preload requests %+v, want one with the system prompt", reqs)
		}
		if st := c.Stats(); st.AudioBytes == 0 {
			t.Fatalf("preloaded entry has no audio: %+v", st)
		}
		h := newToolHarness(t, cfg, be, []string{"what are you able to do"}, answer("The LLM ran."))
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))
		if tr := events(outs, EventTrace)[0]; tr.Cache != CacheHit {
			t.Errorf("first turn's trace cache = %q, want hit", tr.Cache)
		}
		if got := answerText(outs); got != "I can answer questions." {
			t.Errorf("answer %q, want the preloaded one", got)
		}
		if audioFrames(outs) == 0 {
			t.Error("no audio on the preloaded hit")
		}
		h.close()
	})
}

// TestCacheSpeculativeHit: with the semantic end of turn, the speculative
// answer started on the pause is looked up too; its cached audio is held
// until the commit and then goes out at once, with no LLM request.
func TestCacheSpeculativeHit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, _ := cacheBackends()
		cfg := semanticConfig()
		cfg.Speculative = true
		_, pm, ps := newBackends(nil, answer("Hi there."))
		be.LLM, be.TTS = pm, ps
		if n, err := be.Answers.Preload(t.Context(), be, cfg, []string{"hello"}); n != 1 || err != nil {
			t.Fatalf("Preload = %d, %v", n, err)
		}
		a, m, s := newBackends([]string{"hello"}, answer("The LLM ran."))
		be.ASR, be.LLM, be.TTS, be.EOU = a, m, s, &fixedScorer{score: 0} // the turn waits MaxSilenceMs
		h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
		sess, err := NewSession("test", cfg, be, h.obs, harnessLog)
		if err != nil {
			t.Fatalf("NewSession: %v", err)
		}
		h.start(sess, m)
		h.audio(false, 200)
		h.audio(true, 400)
		h.audio(false, 1500)
		outs := h.until("trace event", isEvent(EventTrace))
		tr := events(outs, EventTrace)[0]
		if tr.Cache != CacheHit || !tr.Speculative {
			t.Errorf("trace cache %q speculative %v, want a speculative hit", tr.Cache, tr.Speculative)
		}
		if v2v := *tr.VoiceToVoiceMs; v2v > 1300+2*frameMs {
			t.Errorf("voice-to-voice %v ms, want the 1300 ms wait and nothing more", v2v)
		}
		if n := len(m.requests()); n != 0 {
			t.Errorf("%d LLM requests, want none", n)
		}
		if got := answerText(outs); got != "Hi there." {
			t.Errorf("answer %q, want the cached one", got)
		}
		if n := audioFrames(outs); n != 10 { // two words of 100 ms
			t.Errorf("%d audio frames, want the cached answer's 10", n)
		}
		h.close()
	})
}

// TestCacheHitInterrupted: a hit the client interrupts keeps in the
// history what was heard (the cached audio carries its word marks), and a
// cut turn is not stored again.
func TestCacheHitInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, c := cacheBackends()
		const long = "One two three four five six seven eight."
		h := newToolHarness(t, testConfig(), be, []string{"what is a kettle", "what's a kettle"}, answer(long))
		h.utterance()
		h.until("trace event", isEvent(EventTrace))
		time.Sleep(time.Second)
		h.utterance()
		h.frames(15) // 300 ms of the hit's audio
		h.client(ClientEvent{Type: ClientInterrupt, Turn: 2, PlayedMs: 250})
		tr := events(h.until("trace event", isEvent(EventTrace)), EventTrace)[0]
		if tr.Cache != CacheHit || !tr.Interrupted {
			t.Errorf("trace cache %q interrupted %v, want an interrupted hit", tr.Cache, tr.Interrupted)
		}
		synctest.Wait()
		hist := h.s.History()
		if last := hist[len(hist)-1]; last.Content != "One two" {
			t.Errorf("history ends with %q, want what was heard, \"One two\"", last.Content)
		}
		if st := c.Stats(); st.Entries != 1 || st.Stores != 1 {
			t.Errorf("cache stats %+v, want the first answer stored once", st)
		}
		h.close()
	})
}

// TestCacheNoLearn: with NoLearn a live answer is not stored (nor its
// audio kept), so the same question asked again is a miss again.
func TestCacheNoLearn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be, c := cacheBackends()
		be.Answers.NoLearn = true
		h := newToolHarness(t, testConfig(), be, []string{"what is a kettle", "what is a kettle"}, answer("A pot."))
		for i := range 2 {
			h.utterance()
			if tr := events(h.until("trace event", isEvent(EventTrace)), EventTrace)[0]; tr.Cache != CacheMiss {
				t.Errorf("turn %d: cache %q, want miss", i+1, tr.Cache)
			}
			time.Sleep(time.Second)
		}
		if st := c.Stats(); st.Entries != 0 {
			t.Errorf("the cache holds %d answers, want none", st.Entries)
		}
		h.close()
	})
}
