package pipeline

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/voxpipe/voxpipe/llm"
)

func TestBackchannelMatch(t *testing.T) {
	b, err := newBackchannels(BackchannelConfig{Words: DefaultBackchannels()})
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		"mm-hm": true, "Mm-hmm.": true, "yeah yeah": true, "Okay.": true, "uh huh": true, "i see": true,
		"yeah, okay": true, "嗯嗯": true, "好的。": true, "对对对": true, "alright": true,
		"": false, "   ": false, "okay stop": false, "stop": false, "wait": false, "right?": false,
		"yeah but what about tomorrow": false, "yeahs": false, "i": false, "好吧你等一下": false, "怎么了？": false,
	} {
		if got := b.is(text); got != want {
			t.Errorf("is(%q) = %v, want %v", text, got, want)
		}
	}
	b, err = newBackchannels(BackchannelConfig{Words: DefaultBackchannels(), StopWords: DefaultStopWords()})
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		"stop": true, "okay stop": true, "Wait, what?": true, "hold on a second": true, "no": true, "你等一下": true, "停": true,
		"stopped": false, "nowhere": false, "hold": false, "the": false, "okay": false, "": false,
	} {
		if got := b.stopped(text); got != want {
			t.Errorf("stopped(%q) = %v, want %v", text, got, want)
		}
	}
	var none *backchannels
	if none.is("yeah") || none.stopped("stop") {
		t.Errorf("no backchannels configured: yeah matched")
	}
	for _, c := range []BackchannelConfig{{Words: []string{"yeah", "!!"}}, {Words: []string{"yeah"}, MaxMs: -1}} {
		if _, err := newBackchannels(c); !errors.Is(err, ErrConfig) {
			t.Errorf("newBackchannels(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

// longAnswer is 3 s of toneTTS speech.
var longAnswer = strings.Repeat("word ", 29) + "end."

func backchannelConfig() Config {
	cfg := testConfig()
	cfg.Backchannel = BackchannelConfig{Words: DefaultBackchannels(), StopWords: DefaultStopWords()}
	return cfg
}

// TestBackchannelDoesNotInterrupt: "mm-hm" over the answer is kept and the
// answer plays on; "stop" after it cuts the answer at its partial. The history has the answer as heard,
// then what the person said over it, in order.
func TestBackchannelDoesNotInterrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"tell me a story", "mm-hm", "stop"}, answer(longAnswer), answer("Okay."))
		h := newHarness(t, backchannelConfig(), a, m, s)
		h.utterance()
		outs := h.frames(25)
		h.audio(true, 300) // "mm-hm": long enough for a barge-in by speech alone
		h.audio(false, 600)
		outs = append(outs, h.until("the backchannel's transcript", func(o Output) bool {
			return o.Event != nil && o.Event.Type == EventTranscript && o.Event.Final && o.Event.Backchannel
		})...)
		if n := len(events(outs, EventInterrupted)); n != 0 {
			t.Fatalf("mm-hm interrupted the answer: %s", summarize(outs))
		}
		if ev := events(outs, EventTranscript); ev[len(ev)-1].Turn != 1 || ev[len(ev)-1].Text != "mm-hm" {
			t.Errorf("backchannel transcript %+v, want turn 1's mm-hm", ev[len(ev)-1])
		}
		h.frames(10) // the answer goes on
		h.audio(true, 300)
		h.until("interrupted event", isEvent(EventInterrupted))
		h.client(ClientEvent{Type: ClientInterrupt, Turn: 1, PlayedMs: 1450})
		h.audio(false, 600)
		h.until("turn 2's trace", func(o Output) bool { return o.Event != nil && o.Event.Type == EventTrace && o.Event.Turn == 2 })
		synctest.Wait()
		hist := h.s.History()
		checkHistory(t, hist, []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "tell me a story"},
			{Role: llm.RoleAssistant, Content: strings.TrimSpace(strings.Repeat("word ", 14))},
			{Role: llm.RoleUser, Content: "mm-hm stop"},
			{Role: llm.RoleAssistant, Content: "Okay."},
		})
		if reqs := m.requests(); len(reqs) != 2 {
			t.Errorf("%d LLM requests, want 2 (the backchannel starts no turn)", len(reqs))
		}
		h.close()
	})
}

// TestBackchannelTooLong: speech over the answer longer than a
// backchannel interrupts whatever its words turn out to be.
func TestBackchannelTooLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"tell me a story", "yeah"}, answer(longAnswer), answer("Okay."))
		h := newHarness(t, backchannelConfig(), a, m, s)
		h.utterance()
		h.frames(25)
		h.audio(true, 1200)
		h.until("interrupted event", isEvent(EventInterrupted))
		h.close()
	})
}

// TestBackchannelsOff: without words every utterance over the answer cuts
// it at BargeInMinSpeechMs, "mm-hm" too.
func TestBackchannelsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"tell me a story", "mm-hm"}, answer(longAnswer), answer("Okay."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		h.frames(25)
		h.audio(true, 300)
		h.until("interrupted event", isEvent(EventInterrupted))
		h.close()
	})
}
