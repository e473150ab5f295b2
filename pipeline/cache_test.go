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
