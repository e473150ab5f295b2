package pipeline

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const twoSentences = "One two three. Four five six seven eight."

func newBackends(transcripts []string, scripts ...llmScript) (*fakeASR, *scriptedLLM, *toneTTS) {
	return &fakeASR{transcripts: transcripts, minFrames: 5},
		&scriptedLLM{scripts: scripts},
		&toneTTS{rate: 16000, wordMs: 100}
}

func TestFullTurnTrace(t *testing.T) {
	for _, rate := range []int{16000, 22050} {
		t.Run(strconv.Itoa(rate), func(t *testing.T) { testFullTurnTrace(t, rate) })
	}
}

func testFullTurnTrace(t *testing.T, ttsRate int) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.InputRate = 48000 // exercises the input resampler too
		a, m, s := newBackends([]string{"what time is it"}, answer(twoSentences))
		s.rate = ttsRate
		h := newHarness(t, cfg, a, m, s)
		h.utterance()
		outs := h.until("trace event", isEvent(EventTrace))

		// Transcript: a partial, then the final.
		tr := events(outs, EventTranscript)
		if len(tr) < 2 || tr[0].Final || !tr[len(tr)-1].Final || tr[len(tr)-1].Text != "what time is it" || tr[len(tr)-1].Turn != 1 {
			t.Fatalf("transcript events %s, want partial(s) then final %q for turn 1", summarize(outs), "what time is it")
		}
		// Answer deltas add up to the answer; the last one is Final, and it
		// came before the trace (outs ends at the trace).
		var text strings.Builder
		ans := events(outs, EventAnswer)
		for _, e := range ans {
			text.WriteString(e.Text)
		}
		if text.String() != twoSentences || !ans[len(ans)-1].Final {
			t.Errorf("answer events give %q (last final %v), want %q", text.String(), ans[len(ans)-1].Final, twoSentences)
		}
		// The format event comes once, before the first frame; frames are 20 ms.
		firstAudio := -1
		for i, o := range outs {
			if o.Audio != nil {
				firstAudio = i
				break
			}
		}
		if firstAudio < 0 {
			t.Fatalf("no audio: %s", summarize(outs))
		}
		fmtEv := events(outs[:firstAudio], EventAudio)
		if len(fmtEv) != 1 || fmtEv[0].SampleRate != 48000 || fmtEv[0].Encoding != "pcm16" || fmtEv[0].FrameMs != 20 {
			t.Errorf("before the first frame: %s, want one audio event (pcm16, 48000, 20)", summarize(outs[:firstAudio]))
		}
		for _, o := range outs {
			if o.Audio != nil && len(o.Audio) != 960 {
				t.Fatalf("frame of %d samples, want 960", len(o.Audio))
			}
		}
		// 8 words of 100 ms: 40 frames.
		if n := audioFrames(outs); n != 40 {
			t.Errorf("%d audio frames, want 40", n)
		}

		// The trace: every mark of a normal turn, in causal order.
		evTrace := events(outs, EventTrace)[0]
		if evTrace.Turn != 1 || evTrace.Interrupted || evTrace.VoiceToVoiceMs == nil {
			t.Errorf("trace event %+v, want turn 1, not interrupted, with voice_to_voice_ms", evTrace)
		}
		traces, _ := h.obs.snapshot()
		if len(traces) != 1 {
			t.Fatalf("observer saw %d traces, want 1", len(traces))
		}
		order := []string{MarkSpeechStart, MarkSpeechEnd, MarkASRFinal, MarkLLMRequest, MarkLLMFirstToken,
			MarkTTSFirstChunk, MarkTTSFirstAudio, MarkFirstAudioOut, MarkTurnEnd}
		marks := traces[0].Marks
		for i, name := range order {
			at, ok := marks[name]
			if !ok {
				t.Fatalf("trace lacks %s: %v", name, marks)
			}
			if i > 0 && at.Before(marks[order[i-1]]) {
				t.Errorf("%s (%v) before %s (%v)", name, at, order[i-1], marks[order[i-1]])
			}
			if _, ok := evTrace.Marks[name]; !ok {
				t.Errorf("trace event lacks %s", name)
			}
		}
		if _, ok := marks[MarkASRFirstPartial]; !ok {
			t.Errorf("trace lacks %s", MarkASRFirstPartial)
		}
		// speech_start/end are when the person spoke (400 ms of speech), not
		// when the VAD was sure; voice-to-voice includes the endpointing wait.
		// (Up to two frames more: the resampler's and the VAD's DC filter's
		// ringing after the tone stops.)
		if d := marks[MarkSpeechEnd].Sub(marks[MarkSpeechStart]); d < 400*time.Millisecond || d > 440*time.Millisecond {
			t.Errorf("speech lasted %v by the trace, want 400-440ms", d)
		}
		if v2v, _ := traces[0].VoiceToVoice(); v2v < float64(cfg.VAD.EndSilenceMs) || v2v > float64(cfg.VAD.EndSilenceMs+frameMs) {
			t.Errorf("voice-to-voice %v ms, want the endpointing wait (%d ms) plus at most a frame with instant backends", v2v, cfg.VAD.EndSilenceMs)
		}
		// 40 frames at real-time pace, 100 ms of them sent ahead: turn_end
		// is 800-100-20 = 680 ms after first_audio_out in the bubble's fake time.
		if d := marks[MarkTurnEnd].Sub(marks[MarkFirstAudioOut]); d < 660*time.Millisecond || d > 720*time.Millisecond {
			t.Errorf("audio took %v to send, want about 680 ms (real-time pace, 100 ms lead)", d)
		}

		synctest.Wait()
		want := []llm.Message{
			{Role: llm.RoleSystem, Content: cfg.SystemPrompt},
			{Role: llm.RoleUser, Content: "what time is it"},
			{Role: llm.RoleAssistant, Content: twoSentences},
		}
		checkHistory(t, h.s.History(), want)
		h.close()
	})
}

func checkHistory(t *testing.T, have, want []llm.Message) {
	t.Helper()
	if len(have) != len(want) {
		t.Fatalf("history\nhave %q\nwant %q", have, want)
	}
	for i := range want {
		if !reflect.DeepEqual(have[i], want[i]) {
			t.Fatalf("history[%d]\nhave %q\nwant %q", i, have, want)
		}
	}
}

// TestBargeInBySpeech: the person talks over the answer. The audio stops,
// the server sends interrupted, the client reports what it played, and
// history keeps exactly the words heard; the next turn's request sees it.
func TestBargeInBySpeech(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"count to eight", "stop"}, answer(twoSentences), answer("Okay."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.frames(25) // 500 ms of the answer's 800
		h.audio(true, 300)   // speech: the VAD starts after 100 ms, barge-in after 200 ms
		outs = append(outs, h.until("interrupted event", isEvent(EventInterrupted))...)
		before := audioFrames(outs)
		if ev := events(outs, EventInterrupted)[0]; ev.Turn != 1 {
			t.Errorf("interrupted event for turn %d, want 1", ev.Turn)
		}
		// 8 words × 100 ms: the client played 450 ms: "One two three." fully
		// (it ends at 300 ms) and "Four" (ends at 400 ms), not "five" (500 ms).
		h.client(ClientEvent{Type: ClientInterrupt, Turn: 1, PlayedMs: 450})
		h.audio(false, 600) // the barge-in utterance ends: turn 2, "stop"
		rest := h.until("second trace", isEvent(EventTrace))
		traceOuts := append(outs, rest...)
		if tr := events(traceOuts, EventTrace); len(tr) < 1 || !tr[0].Interrupted || tr[0].Turn != 1 {
			t.Errorf("first trace %s, want turn 1 interrupted", summarize(traceOuts))
		}
		// No frame of turn 1 after interrupted: the next frames are turn 2's.
		for i, o := range rest {
			if o.Event != nil && o.Event.Type == EventTranscript && o.Event.Final {
				if n := audioFrames(rest[:i]); n != 0 {
					t.Errorf("%d frames of the cut turn after interrupted", n)
				}
				break
			}
		}
		if before >= 40 {
			t.Errorf("%d frames sent before the cut, want fewer than the whole answer (40)", before)
		}
		h.until("second trace", isEvent(EventTrace))
		synctest.Wait()
		reqs := m.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d LLM requests, want 2", len(reqs))
		}
		heard := llm.Message{Role: llm.RoleAssistant, Content: "One two three. Four"}
		if got := reqs[1].Messages[2]; !reflect.DeepEqual(got, heard) {
			t.Errorf("turn 2 request holds %q as turn 1's answer, want %q", got, heard)
		}
		checkHistory(t, h.s.History(), []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "count to eight"},
			heard,
			{Role: llm.RoleUser, Content: "stop"},
			{Role: llm.RoleAssistant, Content: "Okay."},
		})
		if traces, _ := h.obs.snapshot(); len(traces) != 2 || !traces[0].Interrupted {
			t.Errorf("observer traces %+v, want 2, the first interrupted", traces)
		} else if _, ok := traces[0].Marks[MarkInterrupted]; !ok {
			t.Errorf("interrupted turn's trace lacks the %s mark", MarkInterrupted)
		}
		h.close()
	})
}

// TestBargeInWithoutReport: no interrupt{played_ms} comes; after
// PlaybackReportTimeout the heard text is estimated from playback_start.
func TestBargeInWithoutReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"count to eight"}, answer(twoSentences))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		h.until("audio", func(o Output) bool { return o.Audio != nil })
		h.client(ClientEvent{Type: ClientPlaybackStart, Turn: 1})
		// The client plays 160 ms, then the person speaks; barge-in fires on
		// the 10th speech frame, 180 ms later: 340 ms played.
		time.Sleep(160 * time.Millisecond)
		h.audio(true, 300)
		h.until("interrupted event", isEvent(EventInterrupted))
		time.Sleep(time.Second) // past PlaybackReportTimeout
		synctest.Wait()
		hist := h.s.History()
		if len(hist) != 3 || hist[2].Content != "One two three." {
			t.Errorf("history %q, want the estimate %q (played ~340 ms)", hist, "One two three.")
		}
		h.close()
	})
}

// TestClientInterrupt: the client stops playback itself. Run for TTS rates
// that need no, an integer and a fractional resampling ratio to 48 kHz.
func TestClientInterrupt(t *testing.T) {
	for _, rate := range []int{48000, 16000, 22050} {
		t.Run(strconv.Itoa(rate), func(t *testing.T) { testClientInterrupt(t, rate) })
	}
}

func testClientInterrupt(t *testing.T, ttsRate int) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"count to eight"}, answer(twoSentences))
		s.rate = ttsRate
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.frames(15)
		h.client(ClientEvent{Type: ClientInterrupt, Turn: 1, PlayedMs: 250})
		outs = append(outs, h.until("trace", isEvent(EventTrace))...)
		time.Sleep(time.Second)
		outs = append(outs, h.drain()...)
		if evs := events(outs, EventInterrupted); len(evs) != 0 {
			t.Errorf("server sent interrupted after the client's own interrupt")
		}
		if n := audioFrames(outs); n >= 40 {
			t.Errorf("%d frames, want the audio cut short of 40", n)
		}
		if tr := events(outs, EventTrace); !tr[0].Interrupted {
			t.Errorf("trace not marked interrupted")
		}
		hist := h.s.History()
		if len(hist) != 3 || hist[2].Content != "One two" {
			t.Errorf("history %q, want assistant %q", hist, "One two")
		}
		h.close()
	})
}

func TestInterruptBeforeAnyWordHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"count", "again"}, answer(twoSentences), answer("Sure."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		h.until("audio", func(o Output) bool { return o.Audio != nil })
		h.client(ClientEvent{Type: ClientInterrupt, PlayedMs: 50}) // turn 0: the current one
		h.until("trace", isEvent(EventTrace))
		h.utterance()
		h.until("trace", isEvent(EventTrace))
		synctest.Wait()
		checkHistory(t, h.s.History(), []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "count"},
			{Role: llm.RoleAssistant, Content: ""},
			{Role: llm.RoleUser, Content: "again"},
			{Role: llm.RoleAssistant, Content: "Sure."},
		})
		h.close()
	})
}

func TestHistoryCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxHistoryMessages = 4
		a, m, s := newBackends([]string{"one", "two", "three", "four"}, answer("A."), answer("B."), answer("C."), answer("D."))
		h := newHarness(t, cfg, a, m, s)
		for range 4 {
			h.utterance()
			h.until("trace", isEvent(EventTrace))
		}
		synctest.Wait()
		checkHistory(t, h.s.History(), []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "three"},
			{Role: llm.RoleAssistant, Content: "C."},
			{Role: llm.RoleUser, Content: "four"},
			{Role: llm.RoleAssistant, Content: "D."},
		})
		for i, r := range m.requests() {
			if r.Messages[0].Role != llm.RoleSystem || len(r.Messages)-1 > cfg.MaxHistoryMessages {
				t.Errorf("request %d: %d messages after the system prompt (cap %d) or no system prompt first", i, len(r.Messages)-1, cfg.MaxHistoryMessages)
			}
		}
		h.close()
	})
}

func TestBackendErrorMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := answer(twoSentences)
		failing.failAt = 5
		a, m, s := newBackends([]string{"first", "second"}, failing, answer("Fine."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.untilAll(EventError, EventTrace)
		ev := events(outs, EventError)[0]
		if ev.Code != CodeBackend || !strings.Contains(ev.Message, errScripted.Error()) || ev.Turn != 1 {
			t.Errorf("error event %+v, want %s naming the failure for turn 1", ev, CodeBackend)
		}
		h.utterance()
		outs = h.until("second trace", isEvent(EventTrace))
		if n := audioFrames(outs); n != 5 {
			t.Errorf("turn 2 sent %d frames, want 5 (one word)", n)
		}
		synctest.Wait()
		hist := h.s.History()
		if len(hist) != 5 || hist[3].Content != "second" || hist[4].Content != "Fine." {
			t.Errorf("history %q, want turn 2 answered in full", hist)
		}
		// Turn 1 spoke "One two three." before the failure; all of it was sent.
		if hist[2].Content != "One two three." {
			t.Errorf("failed turn stored %q, want the audio sent before the failure %q", hist[2].Content, "One two three.")
		}
		h.close()
	})
}

func TestBusyBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"hello"}, llmScript{startErr: llm.ErrBusy, failAt: -1}, answer("Hi."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.untilAll(EventError, EventTrace)
		if ev := events(outs, EventError)[0]; ev.Code != CodeBusy {
			t.Errorf("error code %q, want %q", ev.Code, CodeBusy)
		}
		h.utterance()
		outs = h.until("trace", isEvent(EventTrace))
		if audioFrames(outs) == 0 {
			t.Errorf("no audio for the turn after busy: %s", summarize(outs))
		}
		h.close()
	})
}

func TestTTSFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"hello"}, answer(twoSentences))
		s.failOn = "Four"
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.untilAll(EventError, EventTrace)
		if ev := events(outs, EventError)[0]; ev.Code != CodeBackend || !strings.HasPrefix(ev.Message, "tts:") {
			t.Errorf("error %+v, want %s from tts", ev, CodeBackend)
		}
		h.close()
	})
}

func TestNoiseMakesNoTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{""}, answer("Hi."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		time.Sleep(time.Second)
		synctest.Wait()
		outs := h.drain()
		for _, e := range events(outs, EventTranscript) {
			if e.Final {
				t.Errorf("final transcript %q sent for noise", e.Text)
			}
		}
		if n := len(m.requests()); n != 0 {
			t.Errorf("%d LLM requests for noise, want 0", n)
		}
		if a.started != 1 {
			t.Errorf("%d ASR streams, want 1", a.started)
		}
		h.close()
	})
}

// TestSlowASRDropsFrames: the audio clock never waits for ASR.
func TestSlowASRDropsFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"hello"}, answer("Hi."))
		a.writeGate = make(chan struct{}) // Write blocks until released
		h := newHarness(t, testConfig(), a, m, s)
		h.audio(false, 200)
		h.audio(true, 4000) // 200 frames; the ASR queue holds asrQueueFrames (150)
		synctest.Wait()
		_, drops := h.obs.snapshot()
		if drops["asr_queue_full"] == 0 {
			t.Errorf("no asr_queue_full drops with a stuck ASR: %v", drops)
		}
		h.close()
	})
}

// TestSlowASRStartLosesNoFrames: a Start that takes 4 s (a decoder loaded
// on demand while other sessions arrive) is longer than the 3 s input
// queue; the frames spoken meanwhile still all reach the stream. Before the
// stage took frames into its backlog during Start, they were dropped as
// asr_queue_full.
func TestSlowASRStartLosesNoFrames(t *testing.T) {
	written := func(delay time.Duration) (int, map[string]int) {
		var n int
		var drops map[string]int
		synctest.Test(t, func(t *testing.T) {
			a, m, s := newBackends([]string{"hello there"}, answer("Hi."))
			a.startDelay = delay
			h := newHarness(t, testConfig(), a, m, s)
			h.audio(false, 200)
			for range 20 { // 6 s of syllables
				h.audio(true, 260)
				h.audio(false, 40)
			}
			h.audio(false, h.cfg.VAD.EndSilenceMs+100)
			h.until("final transcript", func(o Output) bool {
				return o.Event != nil && o.Event.Type == EventTranscript && o.Event.Final
			})
			synctest.Wait()
			a.mu.Lock()
			n = a.written
			a.mu.Unlock()
			_, drops = h.obs.snapshot()
			h.close()
		})
		return n, drops
	}
	want, _ := written(0)
	have, drops := written(4 * time.Second)
	if have != want {
		t.Errorf("slow Start: the recogniser got %d samples, with a fast one %d: %d frames lost", have, want, (want-have)/(asrRate*frameMs/1000))
	}
	if len(drops) != 0 {
		t.Errorf("frames dropped: %v", drops)
	}
}

// TestSlowASRLosesNoFrames: a recogniser 1.5x slower than real time falls
// 4 s behind over 12 s of speech, past the 3 s input queue; every frame
// still reaches it (the ASR stage's backlog), and the final comes after it
// catches up.
func TestSlowASRLosesNoFrames(t *testing.T) {
	written := func(delay time.Duration) (int, map[string]int, int) {
		var n, buffered int
		var drops map[string]int
		synctest.Test(t, func(t *testing.T) {
			a, m, s := newBackends([]string{"hello there"}, answer("Hi."))
			a.writeDelay = delay
			h := newHarness(t, testConfig(), a, m, s)
			h.audio(false, 200)
			for range 40 { // 12 s of syllables: the VAD's floor stays low
				h.audio(true, 260)
				h.audio(false, 40)
			}
			h.audio(false, h.cfg.VAD.EndSilenceMs+100)
			h.until("final transcript", func(o Output) bool {
				return o.Event != nil && o.Event.Type == EventTranscript && o.Event.Final
			})
			synctest.Wait()
			a.mu.Lock()
			n = a.written
			t.Logf("delay %v: %d streams, %d samples", delay, a.started, a.written)
			a.mu.Unlock()
			_, drops = h.obs.snapshot()
			h.obs.mu.Lock()
			buffered = h.obs.buffered
			h.obs.mu.Unlock()
			h.close()
		})
		return n, drops, buffered
	}
	want, _, _ := written(0)
	have, drops, buffered := written(30 * time.Millisecond)
	if have != want {
		t.Errorf("slow recogniser got %d samples, a fast one %d: %d frames lost", have, want, (want-have)/(asrRate*frameMs/1000))
	}
	if len(drops) != 0 {
		t.Errorf("frames dropped: %v", drops)
	}
	if buffered == 0 {
		t.Errorf("no frames counted as buffered although the recogniser lagged 4 s")
	}
}

func TestRunEnds(t *testing.T) {
	for _, how := range []string{"in closed", "stop", "ctx cancelled"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, m, s := newBackends([]string{"count"}, answer(twoSentences))
				m.scripts[0].hang = true // the LLM is mid-answer when the session ends
				h := newHarness(t, testConfig(), a, m, s)
				h.utterance()
				h.until("audio", func(o Output) bool { return o.Audio != nil })
				var err error
				switch how {
				case "in closed":
					close(h.in)
					err = <-h.runErr
				case "stop":
					h.client(ClientEvent{Type: ClientStop})
					err = <-h.runErr
				case "ctx cancelled":
					h.cancel()
					err = <-h.runErr
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Run = %v, want context.Canceled", err)
					}
					err = nil
				}
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
				h.cancel()
				h.wg.Wait()
				m.wg.Wait()
				if err := h.s.Run(context.Background(), nil, nil); !errors.Is(err, ErrAlreadyRun) {
					t.Errorf("second Run = %v, want ErrAlreadyRun", err)
				}
			})
		})
	}
}

func TestNewSessionErrors(t *testing.T) {
	a, m, s := newBackends(nil, answer("x"))
	be := Backends{ASR: a, LLM: m, TTS: s}
	for name, mod := range map[string]func(*Config, *Backends){
		"no asr":       func(_ *Config, b *Backends) { b.ASR = nil },
		"odd rate":     func(c *Config, _ *Backends) { c.InputRate = 12345 },
		"bad vad":      func(c *Config, _ *Backends) { c.VAD.ThresholdDB = -1 },
		"neg lead":     func(c *Config, _ *Backends) { c.OutputLeadMs = -5 },
		"rate unknown": func(c *Config, _ *Backends) { c.OutputRate = 44050 },
	} {
		cfg, b := testConfig(), be
		mod(&cfg, &b)
		if _, err := NewSession("x", cfg, b, nil, testLogger()); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewSession = %v, want ErrConfig", name, err)
		}
	}
}

// TestNoBargeIn: with BargeIn off, speech over the answer does not cut it;
// the new words get their turn once the answer is done.
func TestNoBargeIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BargeIn = false
		a, m, s := newBackends([]string{"count", "thanks"}, answer(twoSentences), answer("Welcome."))
		h := newHarness(t, cfg, a, m, s)
		h.utterance()
		outs := h.frames(10)
		h.utterance()
		outs = append(outs, h.until("trace", isEvent(EventTrace))...)
		if n := audioFrames(outs); n != 40 || len(events(outs, EventInterrupted)) != 0 {
			t.Errorf("turn 1: %d frames, interrupted %d times; want 40 frames, not interrupted", n, len(events(outs, EventInterrupted)))
		}
		h.until("trace", isEvent(EventTrace))
		synctest.Wait()
		checkHistory(t, h.s.History(), []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "count"},
			{Role: llm.RoleAssistant, Content: twoSentences},
			{Role: llm.RoleUser, Content: "thanks"},
			{Role: llm.RoleAssistant, Content: "Welcome."},
		})
		h.close()
	})
}
