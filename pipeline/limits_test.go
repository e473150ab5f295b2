package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// TestMaxTurnEndsALongUtterance: speech that goes on past MaxTurn is ended
// there; its words are recognised and answered, the client is told
// (turn_limit, for the turn the words become), the limit is counted, and
// speech that goes on is the next utterance.
func TestMaxTurnEndsALongUtterance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxTurn = 2 * time.Second
		cfg.BargeIn = false // the speech after the limit must not cut the answer here
		a, m, s := newBackends([]string{"first part", "second part"}, answer("One."), answer("Two."))
		h := newHarness(t, cfg, a, m, s)
		h.audio(false, 200)
		h.audio(true, 3000) // 1 s past the limit
		h.audio(false, cfg.VAD.EndSilenceMs+100)
		outs := h.until("the second trace", func() func(Output) bool {
			n := 0
			return func(o Output) bool {
				if o.Event != nil && o.Event.Type == EventTrace {
					n++
				}
				return n == 2
			}
		}())
		errs := events(outs, EventError)
		if len(errs) != 1 || errs[0].Code != CodeTurnLimit || errs[0].Turn != 1 || !strings.Contains(errs[0].Message, "2s") {
			t.Fatalf("error events %+v, want one %s for turn 1 naming the limit; saw %s", errs, CodeTurnLimit, summarize(outs))
		}
		var finals []string
		for _, ev := range events(outs, EventTranscript) {
			if ev.Final {
				finals = append(finals, ev.Text)
			}
		}
		if strings.Join(finals, "|") != "first part|second part" {
			t.Errorf("final transcripts %q, want the words before and after the limit", finals)
		}
		synctest.Wait()
		hist := h.s.History()
		if len(hist) != 5 || hist[1].Content != "first part" || hist[2].Content != "One." || hist[3].Content != "second part" {
			t.Errorf("history %q, want both parts answered", hist)
		}
		h.obs.mu.Lock()
		limited := h.obs.limited
		h.obs.mu.Unlock()
		if limited != 1 {
			t.Errorf("TurnLimited called %d times, want 1", limited)
		}
		h.close()
	})
}

// TestMaxTurnOffByDefault: without MaxTurn a long utterance is one turn.
func TestMaxTurnOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		a, m, s := newBackends([]string{"all of it"}, answer("One."))
		h := newHarness(t, cfg, a, m, s)
		h.audio(false, 200)
		h.audio(true, 3000)
		h.audio(false, cfg.VAD.EndSilenceMs+100)
		outs := h.until("the trace", isEvent(EventTrace))
		if errs := events(outs, EventError); len(errs) != 0 {
			t.Errorf("error events %+v, want none", errs)
		}
		h.close()
	})
}

// TestResume: a session resumed from an earlier one's history and turn
// number sends that history with the next request and numbers on; the
// conversation then grows as usual. Resume after Run is refused.
func TestResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		a, m, s := newBackends([]string{"and tomorrow"}, answer("Rain."))
		earlier := []llm.Message{
			{Role: llm.RoleSystem, Content: cfg.SystemPrompt},
			{Role: llm.RoleUser, Content: "weather today"},
			{Role: llm.RoleAssistant, Content: "Sun."},
		}
		h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
		sess, err := NewSession("resumed", cfg, Backends{ASR: a, LLM: m, TTS: s}, h.obs, harnessLog)
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Resume(earlier, 3); err != nil {
			t.Fatal(err)
		}
		h.start(sess, m)
		h.utterance()
		outs := h.until("the trace", isEvent(EventTrace))
		if tr := events(outs, EventTrace); tr[0].Turn != 4 {
			t.Errorf("trace for turn %d, want 4 (numbered on from 3)", tr[0].Turn)
		}
		reqs := m.requests()
		if len(reqs) != 1 || len(reqs[0].Messages) != 4 || reqs[0].Messages[2].Content != "Sun." || reqs[0].Messages[3].Content != "and tomorrow" {
			t.Errorf("request %+v, want the earlier history then the new words", reqs)
		}
		synctest.Wait()
		if hist := h.s.History(); len(hist) != 5 || hist[4].Content != "Rain." {
			t.Errorf("history %q", hist)
		}
		h.close()
		if n := sess.LastTurn(); n != 4 {
			t.Errorf("LastTurn %d, want 4", n)
		}
		if err := sess.Resume(earlier, 3); err == nil {
			t.Error("Resume after Run succeeded")
		}
	})
}

// TestOutputBacklogBounded: a client that stops taking the session's output
// while the answer streams on (here 9000 deltas with no sentence break, so
// the TTS path applies no back-pressure) ends the session with
// ErrOutputBacklog instead of queueing events without bound.
func TestOutputBacklogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		toks := make([]string, 9000)
		for i := range toks {
			toks[i] = "x"
		}
		a, m, s := newBackends([]string{"go on"}, llmScript{tokens: toks, failAt: -1})
		sess, err := NewSession("stalled", cfg, Backends{ASR: a, LLM: m, TTS: s}, nil, harnessLog)
		if err != nil {
			t.Fatal(err)
		}
		in := make(chan Input)
		out := make(chan Output) // never read: the client stalled
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runErr := make(chan error, 1)
		go func() { runErr <- sess.Run(ctx, in, out) }()
		n := cfg.InputRate * frameMs / 1000
		speech, quiet := tone(n, cfg.InputRate, 220, 8000), make([]int16, n)
		send := func(frame []int16, ms int) {
			for range ms / frameMs {
				select {
				case in <- Input{Audio: append([]int16(nil), frame...)}:
				case err := <-runErr:
					runErr <- err
					return
				}
				time.Sleep(frameDur)
			}
		}
		send(quiet, 200)
		send(speech, 400)
		send(quiet, cfg.VAD.EndSilenceMs+100)
		select {
		case err := <-runErr:
			if !errors.Is(err, ErrOutputBacklog) {
				t.Fatalf("Run = %v, want ErrOutputBacklog", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the session kept queueing output for a client that reads nothing")
		}
		m.wg.Wait()
	})
}
