package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// fakeTool answers with result after delay.
type fakeTool struct {
	name   string
	result string
	delay  time.Duration
	calls  chan string // the arguments of each call, if set
}

func (f *fakeTool) Spec() llm.Tool {
	return llm.Tool{Name: f.name, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
}

func (f *fakeTool) Call(ctx context.Context, c tools.Call) (string, error) {
	if f.calls != nil {
		f.calls <- string(c.Arguments)
	}
	select {
	case <-time.After(f.delay):
		return f.result, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func newToolHarness(t *testing.T, cfg Config, be Backends, transcripts []string, scripts ...llmScript) *harness {
	t.Helper()
	a, m, s := newBackends(transcripts, scripts...)
	be.ASR, be.LLM, be.TTS = a, m, s
	h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
	sess, err := NewSession("test", cfg, be, h.obs, harnessLog)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return h.start(sess, m)
}

func answerText(outs []Output) string {
	var b strings.Builder
	for _, e := range events(outs, EventAnswer) {
		b.WriteString(e.Text)
	}
	return b.String()
}

// TestToolRound: the model speaks, calls a tool, gets its result and
// answers; the person hears both texts, the client sees the call and its
// result, the history and the trace keep them.
func TestToolRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &fakeTool{name: "get_time", result: "It is noon.", delay: 30 * time.Millisecond, calls: make(chan string, 1)}
		call := llm.ToolCall{ID: "c1", Name: "get_time", Arguments: `{"n":1}`}
		first := answer("Let me look.")
		first.calls = []llm.ToolCall{call}
		h := newToolHarness(t, testConfig(), Backends{Tools: []tools.Provider{tools.Static{clock}}},
			[]string{"what time is it"}, first, answer("It is twelve."))
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))

		if got := answerText(outs); got != "Let me look.It is twelve." && got != "Let me look. It is twelve." {
			t.Errorf("answer events give %q", got)
		}
		if args := <-clock.calls; args != `{"n":1}` {
			t.Errorf("tool got %s", args)
		}
		calls, results := events(outs, EventToolCall), events(outs, EventToolResult)
		if len(calls) != 1 || calls[0].Tool.Name != "get_time" || calls[0].Tool.ID != "c1" || calls[0].Tool.Arguments != `{"n":1}` {
			t.Fatalf("tool_call events %s", summarize(outs))
		}
		if len(results) != 1 || results[0].Tool.Outcome != tools.OutcomeOK || results[0].Tool.Result != "It is noon." || *results[0].Tool.DurationMs < 30 {
			t.Fatalf("tool_result events %+v", results)
		}
		reqs := h.llm.requests()
		if len(reqs) != 2 || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "get_time" {
			t.Fatalf("requests %+v", reqs)
		}
		n := len(reqs[1].Messages)
		if n < 2 || len(reqs[1].Messages[n-2].ToolCalls) != 1 || reqs[1].Messages[n-1].Role != llm.RoleTool || reqs[1].Messages[n-1].Content != "It is noon." {
			t.Fatalf("second request's messages %+v", reqs[1].Messages)
		}
		// The text before the call was spoken before the call ran.
		if texts := h.tts.texts; len(texts) < 2 || !strings.Contains(texts[0], "Let me look") {
			t.Errorf("TTS texts %q", texts)
		}
		tr := events(outs, EventTrace)[0]
		if len(tr.Tools) != 1 || tr.Tools[0].Name != "get_time" || tr.Tools[0].Outcome != tools.OutcomeOK || tr.Marks[MarkToolCall] <= 0 {
			t.Errorf("trace tools %+v marks %v", tr.Tools, tr.Marks)
		}
		synctest.Wait()
		hist := h.s.History()
		if len(hist) != 5 || hist[2].ToolCalls[0].ID != "c1" || hist[3].ToolCallID != "c1" || !strings.Contains(hist[4].Content, "It is twelve.") {
			t.Fatalf("history %+v", hist)
		}
		if err := llm.ValidateToolMessages(hist); err != nil {
			t.Fatal(err)
		}
		h.close()
	})
}

// TestToolFailures: a call to a tool the turn does not have, or with bad
// arguments, goes back to the model as an error result; the turn goes on.
func TestToolFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := answer("")
		first.tokens = nil
		first.calls = []llm.ToolCall{{ID: "a", Name: "launch", Arguments: `{}`}, {ID: "b", Name: "get_time", Arguments: `{"n":"x"}`}}
		h := newToolHarness(t, testConfig(), Backends{Tools: []tools.Provider{tools.Static{&fakeTool{name: "get_time"}}}},
			[]string{"launch"}, first, answer("I cannot."))
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))
		res := events(outs, EventToolResult)
		if len(res) != 2 || res[0].Tool.Outcome != tools.OutcomeUnknown || res[1].Tool.Outcome != tools.OutcomeBadArgs {
			t.Fatalf("results %s", summarize(outs))
		}
		if answerText(outs) != "I cannot." {
			t.Errorf("answer %q", answerText(outs))
		}
		h.close()
	})
}

// TestToolRoundsLimit: a model that keeps calling is stopped after
// MaxRounds with a spoken sentence and a tool_rounds error.
func TestToolRoundsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Tools.MaxRounds = 2
		cfg.Tools.RoundsLimitSay = "Sorry, I could not finish that."
		loop := answer("")
		loop.tokens = nil
		loop.calls = []llm.ToolCall{{ID: "x", Name: "get_time"}}
		h := newToolHarness(t, cfg, Backends{Tools: []tools.Provider{tools.Static{&fakeTool{name: "get_time", result: "noon"}}}},
			[]string{"loop"}, loop)
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))
		if n := len(events(outs, EventToolResult)); n != 2 {
			t.Errorf("%d calls ran, want 2 (the rounds limit)", n)
		}
		errs := events(outs, EventError)
		if len(errs) != 1 || errs[0].Code != CodeToolRounds {
			t.Errorf("errors %s", summarize(outs))
		}
		if !strings.Contains(answerText(outs), "could not finish") || audioFrames(outs) == 0 {
			t.Errorf("answer %q, %d frames", answerText(outs), audioFrames(outs))
		}
		h.close()
	})
}

// TestToolFiller: a slow call gets a filler after FillerAfter, so the
// person does not sit in silence.
func TestToolFiller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Tools.FillerAfter, cfg.Tools.FillerEvery = time.Second, 3*time.Second
		cfg.Tools.Fillers = []string{"One moment.", "Still working."}
		cfg.Tools.Limits.CallTimeout = 20 * time.Second
		first := answer("")
		first.tokens = nil
		first.calls = []llm.ToolCall{{ID: "s", Name: "slow"}}
		h := newToolHarness(t, cfg, Backends{Tools: []tools.Provider{tools.Static{&fakeTool{name: "slow", result: "done", delay: 5 * time.Second}}}},
			[]string{"do it"}, first, answer("Done."))
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))
		got := answerText(outs)
		if !strings.HasPrefix(got, "One moment. Still working.") || !strings.HasSuffix(got, "Done.") {
			t.Errorf("answer %q, want the fillers, then the answer", got)
		}
		h.close()
	})
}

// TestNoticeSpoken: a tool's notice (a timer) is spoken as a turn of its
// own when the session is idle, and kept in the history.
func TestNoticeSpoken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := tools.NewConversations(time.Hour, time.UTC, zerolog.Nop())
		cfg := testConfig()
		cfg.ConversationKey = "dev"
		h := newToolHarness(t, cfg, Backends{Conversations: reg}, []string{"hi"}, answer("Hello."))
		h.utterance()
		h.until("trace event", isEvent(EventTrace))
		synctest.Wait()
		reg.Open("dev").Announce(tools.Notice{Text: "Your timer is done.", From: "set_timer"})
		outs := h.until("trace event", isEvent(EventTrace))
		nt := events(outs, EventNotice)
		if len(nt) != 1 || nt[0].Text != "Your timer is done." || nt[0].Turn != 2 || audioFrames(outs) == 0 {
			t.Fatalf("notice turn %s", summarize(outs))
		}
		if answerText(outs) != "Your timer is done." {
			t.Errorf("answer %q", answerText(outs))
		}
		synctest.Wait()
		hist := h.s.History()
		if last := hist[len(hist)-1]; last.Role != llm.RoleAssistant || last.Content != "Your timer is done." {
			t.Errorf("history %+v", hist)
		}
		h.close()
		reg.Close()
	})
}

// TestNoticeAfterSessionEnds: a notice for a conversation whose session is
// gone waits for the next session of the same conversation (a resume, a
// device reconnecting).
func TestNoticeAfterSessionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := tools.NewConversations(time.Hour, time.UTC, zerolog.Nop())
		cfg := testConfig()
		cfg.ConversationKey = "dev"
		h := newToolHarness(t, cfg, Backends{Conversations: reg}, []string{"hi"}, answer("Hello."))
		h.close()
		if !reg.Open("dev").Announce(tools.Notice{Text: "Your timer is done.", From: "set_timer"}) {
			t.Fatal("the notice was dropped, want held")
		}
		h2 := newToolHarness(t, cfg, Backends{Conversations: reg}, []string{"hi"}, answer("Hello."))
		outs := h2.until("trace event", isEvent(EventTrace))
		if nt := events(outs, EventNotice); len(nt) != 1 {
			t.Fatalf("the next session did not speak the held notice: %s", summarize(outs))
		}
		h2.close()
		reg.Close()
	})
}
