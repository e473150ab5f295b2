package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"

	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// fixedScorer scores every partial the same and records what it was asked.
type fixedScorer struct {
	mu    sync.Mutex
	score float64
	texts []string
}

func (f *fixedScorer) Score(_ context.Context, _, text string) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.texts = append(f.texts, text)
	return f.score, nil
}

func semanticConfig() Config {
	cfg := testConfig()
	cfg.Turn = endturn.Config{Mode: endturn.ModeSemantic, MinSilenceMs: 160, MaxSilenceMs: 1300, Threshold: 0.3, DoubtMs: 800}
	return cfg
}

func newSemanticHarness(t *testing.T, cfg Config, sc endturn.Scorer, transcripts []string, scripts ...llmScript) *harness {
	a, m, s := newBackends(transcripts, scripts...)
	h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
	sess, err := NewSession("test", cfg, Backends{ASR: a, LLM: m, TTS: s, EOU: sc}, h.obs, zerolog.Nop())
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return h.start(sess, m)
}

// TestSemanticEndOfTurn: a partial that reads complete ends the turn after
// MinSilenceMs; one that reads cut off waits MaxSilenceMs, and a pause
// shorter than that inside it does not split the utterance. The trace says
// which.
func TestSemanticEndOfTurn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		score float64
		wait  int
	}{{"complete", 0.9, 160}, {"cut off", 0, 1300}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := &fixedScorer{score: tc.score}
				cfg := semanticConfig()
				h := newSemanticHarness(t, cfg, sc, []string{"what time is it"}, answer("Noon."))
				h.audio(false, 200)
				h.audio(true, 400)
				if tc.score < 0.3 { // a hesitation: stays one utterance
					h.audio(false, 600)
					h.audio(true, 200)
				}
				h.audio(false, 1500)
				outs := h.until("trace event", isEvent(EventTrace))
				tr := events(outs, EventTrace)[0]
				if tr.EndSilenceMs < tc.wait || tr.EndSilenceMs > tc.wait+frameMs {
					t.Errorf("end_silence_ms %d, want %d", tr.EndSilenceMs, tc.wait)
				}
				if tr.EOUScore == nil || *tr.EOUScore < tc.score-0.001 || *tr.EOUScore > tc.score+0.001 {
					t.Errorf("eou_score %v, want %v", tr.EOUScore, tc.score)
				}
				finals := 0
				for _, e := range events(outs, EventTranscript) {
					if e.Final {
						finals++
					}
				}
				if finals != 1 {
					t.Errorf("%d final transcripts, want 1: %s", finals, summarize(outs))
				}
				if v2v := *tr.VoiceToVoiceMs; v2v > float64(tc.wait+2*frameMs) {
					t.Errorf("voice-to-voice %v ms with instant backends, want about the wait (%d ms)", v2v, tc.wait)
				}
				sc.mu.Lock()
				asked := len(sc.texts)
				sc.mu.Unlock()
				if asked == 0 {
					t.Error("the scorer saw no partial")
				}
				h.close()
			})
		})
	}
}

// TestSemanticNeedsScorer: semantic mode without a scorer is a config error.
func TestSemanticNeedsScorer(t *testing.T) {
	a, m, s := newBackends([]string{"x"}, answer("y"))
	if _, err := NewSession("x", semanticConfig(), Backends{ASR: a, LLM: m, TTS: s}, nil, zerolog.Nop()); err == nil {
		t.Fatal("semantic mode without Backends.EOU was accepted")
	}
}

// TestEndWaitPacking: what audio-in reads back is what the stage stored, for
// the right utterance only.
func TestEndWaitPacking(t *testing.T) {
	var w endWait
	if _, _, ok := w.load(1); ok {
		t.Fatal("empty endWait gave a decision")
	}
	w.store(7, 160*time.Millisecond, 0.8125)
	ms, score, ok := w.load(7)
	if !ok || ms != 160 || score < 0.812 || score > 0.813 {
		t.Errorf("load = %d, %v, %v; want 160, 0.8125, true", ms, score, ok)
	}
	if _, _, ok := w.load(8); ok {
		t.Error("a decision for utterance 7 was read for 8")
	}
}

// TestSpeculativeAnswer: on a pause the answer starts and is held (no audio
// and no answer text before the final transcript); a final with the same
// words sends it at once, with the history as without speculation. A final
// with other words discards it and answers those words normally.
func TestSpeculativeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		said     string // the fake recogniser's partial is its first word
		promoted bool
	}{{"same words", "hello", true}, {"other words", "what time is it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := semanticConfig()
				cfg.Speculative = true
				sc := &fixedScorer{score: 0} // the turn waits MaxSilenceMs: time to prepare the answer
				h := newSemanticHarness(t, cfg, sc, []string{tc.said}, answer("Hi there."), answer("Hi there."))
				h.audio(false, 200)
				h.audio(true, 400)
				h.audio(false, 1500)
				outs := h.until("trace event", isEvent(EventTrace))
				final := -1
				for i, o := range outs {
					if o.Event != nil && o.Event.Type == EventTranscript && o.Event.Final {
						final = i
						break
					}
					// The release follows the final transcript in the pacer's
					// queue. (A normal turn's audio may overtake its transcript
					// event: they travel on different channels.)
					if tc.promoted && (o.Audio != nil || (o.Event != nil && o.Event.Type == EventAnswer)) {
						t.Fatalf("answer output before the final transcript: %s", summarize(outs[:i+1]))
					}
				}
				if final < 0 {
					t.Fatalf("no final transcript: %s", summarize(outs))
				}
				// A promoted turn's held answer text comes before its held
				// audio, so a client files the audio under this turn.
				for i, o := range outs[final:] {
					if !tc.promoted {
						break
					}
					if o.Event != nil && o.Event.Type == EventAnswer {
						break
					}
					if o.Audio != nil {
						t.Fatalf("audio before the turn's first answer event: %s", summarize(outs[final:final+i+1]))
					}
				}
				tr := events(outs, EventTrace)[0]
				if tr.Speculative != tc.promoted {
					t.Errorf("trace speculative %v, want %v", tr.Speculative, tc.promoted)
				}
				if tc.promoted {
					if tr.SpeculativeLeadMs == nil || *tr.SpeculativeLeadMs < 1000 {
						t.Errorf("speculative_lead_ms %v, want >= 1000 (started at the pause, committed after 1300 ms)", tr.SpeculativeLeadMs)
					}
					// The held audio goes out at the commit: no LLM or TTS time after it.
					if v2v := *tr.VoiceToVoiceMs; v2v > 1300+2*frameMs {
						t.Errorf("voice-to-voice %v ms, want the 1300 ms wait and nothing more", v2v)
					}
					if n := len(h.llm.requests()); n != 1 {
						t.Errorf("%d LLM requests, want 1 (the speculative one)", n)
					}
				} else if n := len(h.llm.requests()); n != 2 {
					t.Errorf("%d LLM requests, want 2 (discarded speculation, then the turn)", n)
				}
				committed, discarded := 0, 1
				if tc.promoted {
					committed, discarded = 1, 0
				}
				if c, d := h.obs.speculations(SpeculationCommitted), h.obs.speculations(SpeculationDiscarded); c != committed || d != discarded {
					t.Errorf("observed %d committed, %d discarded speculations; want %d, %d", c, d, committed, discarded)
				}
				if n := audioFrames(outs); n != 10 { // two words of 100 ms: one answer's audio
					t.Errorf("%d audio frames, want 10 (the discarded answer's audio is never sent)", n)
				}
				var text string
				for _, e := range events(outs, EventAnswer) {
					text += e.Text
				}
				if text != "Hi there." {
					t.Errorf("answer events give %q, want %q once", text, "Hi there.")
				}
				if reqs := h.llm.requests(); !reqs[0].Speculative {
					t.Error("the first request was not marked speculative")
				}
				synctest.Wait()
				checkHistory(t, h.s.History(), []llm.Message{
					{Role: llm.RoleSystem, Content: cfg.SystemPrompt},
					{Role: llm.RoleUser, Content: tc.said},
					{Role: llm.RoleAssistant, Content: "Hi there."},
				})
				h.close()
			})
		})
	}
}

// TestSpeculationDiscardedOnResume: speech after a pause discards the
// speculation at once; the next pause starts a new one, which the commit
// promotes. Only its audio is sent.
func TestSpeculationDiscardedOnResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := semanticConfig()
		cfg.Speculative = true
		h := newSemanticHarness(t, cfg, &fixedScorer{score: 0}, []string{"hello"}, answer("Hi there."))
		h.audio(false, 200)
		h.audio(true, 400)
		h.audio(false, 200) // a pause: a speculation starts
		h.audio(true, 400)  // speech again: it is discarded
		h.audio(false, 1500)
		outs := h.until("trace event", isEvent(EventTrace))
		tr := events(outs, EventTrace)[0]
		// Promoted: the second speculation, started at the last pause 1300 ms
		// before the commit (the first one began 600 ms earlier).
		if !tr.Speculative || tr.SpeculativeLeadMs == nil || *tr.SpeculativeLeadMs > 1300 {
			t.Errorf("speculative %v lead %v ms, want the speculation of the last pause (<= 1300 ms)", tr.Speculative, tr.SpeculativeLeadMs)
		}
		if reqs := h.llm.requests(); len(reqs) != 2 || !reqs[0].Speculative || !reqs[1].Speculative {
			t.Errorf("%d requests, want two speculations", len(reqs))
		}
		if n := audioFrames(outs); n != 10 {
			t.Errorf("%d audio frames, want 10 (one answer)", n)
		}
		if c, d := h.obs.speculations(SpeculationCommitted), h.obs.speculations(SpeculationDiscarded); c != 1 || d != 1 {
			t.Errorf("observed %d committed, %d discarded speculations; want 1 and 1", c, d)
		}
		h.close()
	})
}

// TestPauseFinal: with Config.PauseFinal, a pause whose partial may end the
// turn ends the recogniser's utterance there, so the speculation answers
// the final's words (the fake recogniser's partial is only the first word)
// and the commit promotes it without waiting for another final. Without
// it, the speculation on the partial is discarded at the commit.
func TestPauseFinal(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pauseFinal float64
		promoted   bool
	}{{"off", 0, false}, {"on", 0.05, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := semanticConfig()
				cfg.Speculative, cfg.PauseFinal = true, tc.pauseFinal
				h, a := newPauseFinalHarness(t, cfg, &fixedScorer{score: 0.9}, "what time is it", answer("Noon."), answer("Noon."))
				h.audio(false, 200)
				h.audio(true, 400)
				h.audio(false, 1500)
				outs := h.until("trace event", isEvent(EventTrace))
				tr := events(outs, EventTrace)[0]
				if tr.Speculative != tc.promoted {
					t.Errorf("trace speculative %v, want %v", tr.Speculative, tc.promoted)
				}
				if tr.PauseFinal != tc.promoted {
					t.Errorf("trace pause_final %v, want %v", tr.PauseFinal, tc.promoted)
				}
				if tr.EndSilenceMs != 160 {
					t.Errorf("end_silence_ms %d, want 160 (the partial reads complete)", tr.EndSilenceMs)
				}
				checkOneDecode(t, outs, a, "what time is it")
				wantReqs := 2 // the discarded speculation, then the turn
				if tc.promoted {
					wantReqs = 1
				}
				if n := len(h.llm.requests()); n != wantReqs {
					t.Errorf("%d LLM requests, want %d", n, wantReqs)
				}
				synctest.Wait()
				checkHistory(t, h.s.History(), []llm.Message{
					{Role: llm.RoleSystem, Content: cfg.SystemPrompt},
					{Role: llm.RoleUser, Content: "what time is it"},
					{Role: llm.RoleAssistant, Content: "Noon."},
				})
				h.close()
			})
		})
	}
}

// checkOneDecode checks that the utterance was decoded once, in one stream,
// and that its one final transcript is said.
func checkOneDecode(t *testing.T, outs []Output, a *fakeASR, said string) {
	t.Helper()
	if finals := finalTexts(outs); len(finals) != 1 || finals[0] != said {
		t.Errorf("final transcripts %q, want one, the whole utterance", finals)
	}
	a.mu.Lock()
	started, closed := a.started, len(a.closed)
	a.mu.Unlock()
	if started != 1 || closed != 1 {
		t.Errorf("%d streams started, %d closed; want 1 and 1", started, closed)
	}
}

// wordsScorer reads one word as cut off and more as complete: the fake
// recogniser's partial is the first word, its final the whole text.
type wordsScorer struct{}

func (wordsScorer) Score(_ context.Context, _, text string) (float64, error) {
	if strings.Contains(text, " ") {
		return 0.9, nil
	}
	return 0.02, nil
}

// TestPauseFinalLongPause: a partial that reads cut off is not finalised at
// the pause's start (Config.PauseFinal), but with Config.PauseFinalMs a pause
// that lasts gets the final anyway; the final reads complete and ends the
// turn there instead of after Turn.MaxSilenceMs.
func TestPauseFinalLongPause(t *testing.T) {
	for _, tc := range []struct {
		name             string
		afterMs          int
		minSilence, maxS int
		pauseFinal       bool
	}{{"off", 0, 1300, 1300, false}, {"300ms", 300, 300, 400, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := semanticConfig()
				cfg.Speculative, cfg.PauseFinal, cfg.PauseFinalMs = true, 0.1, tc.afterMs
				h, a := newPauseFinalHarness(t, cfg, wordsScorer{}, "what time is it", answer("Noon."), answer("Noon."))
				h.audio(false, 200)
				h.audio(true, 400)
				h.audio(false, 2000)
				outs := h.until("trace event", isEvent(EventTrace))
				tr := events(outs, EventTrace)[0]
				if tr.EndSilenceMs < tc.minSilence || tr.EndSilenceMs > tc.maxS {
					t.Errorf("end_silence_ms %d, want %d..%d", tr.EndSilenceMs, tc.minSilence, tc.maxS)
				}
				if tr.PauseFinal != tc.pauseFinal {
					t.Errorf("trace pause_final %v, want %v", tr.PauseFinal, tc.pauseFinal)
				}
				checkOneDecode(t, outs, a, "what time is it")
				h.close()
			})
		})
	}
}

// TestPauseFinalResume: speech after a pause that was finalised starts a new
// stream that is given the utterance from its first sample, so the one final
// transcript is the whole utterance's, decoded in one piece; the speculation
// of the first pause is discarded and the last pause's is committed.
func TestPauseFinalResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := semanticConfig()
		cfg.Speculative, cfg.PauseFinal = true, 0.05
		h, a := newPauseFinalHarness(t, cfg, &fixedScorer{score: 0.9}, "set an alarm for six", answer("Done."), answer("Done."))
		h.audio(false, 200)
		h.audio(true, 400)
		h.audio(false, 100) // a pause, shorter than the 160 ms wait: finalised, then
		h.audio(true, 400)  // speech again
		h.audio(false, 1500)
		outs := h.until("trace event", isEvent(EventTrace))
		finals := finalTexts(outs)
		if len(finals) != 1 || finals[0] != "set an alarm for six" {
			t.Errorf("final transcripts %q, want one", finals)
		}
		a.mu.Lock()
		started, closed := a.started, append([]int(nil), a.closed...)
		a.mu.Unlock()
		// The second stream had the first one's audio, the pause and the
		// rest of the speech: at least 400+100+400 ms.
		if started != 2 || len(closed) != 2 || closed[1] <= closed[0] || closed[1] < asrRate*900/1000 {
			t.Errorf("%d streams started, closed with %v samples; want 2, the second with the whole utterance", started, closed)
		}
		tr := events(outs, EventTrace)[0]
		if !tr.Speculative {
			t.Error("the last pause's speculation was not committed")
		}
		if c, d := h.obs.speculations(SpeculationCommitted), h.obs.speculations(SpeculationDiscarded); c != 1 || d != 1 {
			t.Errorf("observed %d committed, %d discarded speculations; want 1 and 1", c, d)
		}
		h.obs.mu.Lock()
		pf, replayed := h.obs.finals, h.obs.replayed
		h.obs.mu.Unlock()
		if pf[PauseFinalResumed] != 1 || pf[PauseFinalCommitted] != 1 || replayed < 500*time.Millisecond {
			t.Errorf("pause finals observed %v, %v replayed; want one resumed (at least the first 400 ms of speech and the pause again) and one committed", pf, replayed)
		}
		if n := audioFrames(outs); n != 5 { // one word of 100 ms
			t.Errorf("%d audio frames, want 5 (one answer)", n)
		}
		h.close()
	})
}

func newPauseFinalHarness(t *testing.T, cfg Config, sc endturn.Scorer, said string, scripts ...llmScript) (*harness, *fakeASR) {
	a, m, s := newBackends([]string{said}, scripts...)
	h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
	sess, err := NewSession("test", cfg, Backends{ASR: a, LLM: m, TTS: s, EOU: sc}, h.obs, zerolog.Nop())
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return h.start(sess, m), a
}

// TestPauseFinalResumeFails: when no stream can be started for the speech
// after a finalised pause, the words before it stay the final (they are
// answered) and the client gets the error.
func TestPauseFinalResumeFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := semanticConfig()
		cfg.Speculative, cfg.PauseFinal = true, 0.05
		h, a := newPauseFinalHarness(t, cfg, &fixedScorer{score: 0.9}, "set an alarm", answer("For when?"))
		a.mu.Lock()
		a.failAfter = 1
		a.mu.Unlock()
		h.audio(false, 200)
		h.audio(true, 400)
		h.audio(false, 100)
		h.audio(true, 400)
		h.audio(false, 1500)
		outs := h.until("trace event", isEvent(EventTrace))
		finals := finalTexts(outs)
		if len(finals) != 1 || finals[0] != "set an alarm" {
			t.Errorf("final transcripts %q, want the words before the pause", finals)
		}
		if errs := events(outs, EventError); len(errs) != 1 || errs[0].Code != CodeBackend {
			t.Errorf("error events %+v, want one %s", errs, CodeBackend)
		}
		h.close()
	})
}

// finalTexts returns the final transcripts among outs, in order.
func finalTexts(outs []Output) []string {
	var finals []string
	for _, e := range events(outs, EventTranscript) {
		if e.Final {
			finals = append(finals, e.Text)
		}
	}
	return finals
}
