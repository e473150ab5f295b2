package xiaozhi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/pipeline"
)

const question = "what is the weather like today"

// speakTurn streams question in real time after a wake-word burst and
// listen detect + start (the most common turn, reference §9.1), keeps the
// microphone open with silence until tts start (the server's VAD ends the
// turn), and returns the index of the first message of the turn.
func speakTurn(t *testing.T, ts *testServer, d *fakeDevice, mode string, burst bool) int {
	t.Helper()
	_, synth := engines(t)
	from := len(d.snapshot())
	if burst {
		// ~2 s of audio before detection, as fast as the link allows, before
		// any listen message: it holds the wake word and must not become a
		// turn of its own.
		d.burst(speak(t, synth, "hey there hello"))
		d.sendJSON(map[string]any{"type": "listen", "state": "detect", "text": "Hi ESP"})
	}
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": mode})
	d.stream(speak(t, synth, question), true)
	d.streamUntil(func() bool { return d.has(from, isMsg(typeTTS, ttsStart)) }, 20*time.Second)
	return from
}

// checkTurnOrder checks one answered turn's messages against the firmware's
// expectations: stt, llm, tts start, sentence_start, audio, tts stop; no
// audio outside speaking; 60 ms packets; paced near real time.
func checkTurnOrder(t *testing.T, msgs []devMsg, wantSentence string) {
	t.Helper()
	var order []string
	var audioN, audible int
	var firstAudio, lastAudio, start, stop time.Time
	for _, m := range msgs {
		if m.typ == "audio" {
			if audioN == 0 {
				firstAudio = m.at
			}
			if order[len(order)-1] != "audio" {
				order = append(order, "audio")
			}
			audioN++
			lastAudio = m.at
			if m.audible {
				audible++
			}
			if m.samples != 24000*frameDurationMs/1000 {
				t.Errorf("audio packet of %d samples, want %d (60 ms at 24 kHz)", m.samples, 24000*frameDurationMs/1000)
			}
			continue
		}
		key := m.typ
		if m.state != "" {
			key += ":" + m.state
		}
		if len(order) == 0 || order[len(order)-1] != key {
			order = append(order, key)
		}
		switch key {
		case "tts:start":
			start = m.at
		case "tts:stop":
			stop = m.at
		case "tts:sentence_start":
			if wantSentence != "" && !strings.Contains(m.text, wantSentence) {
				t.Errorf("sentence_start %q, want it to hold %q", m.text, wantSentence)
			}
		}
	}
	// tts start goes out at the end of the utterance when the session
	// heard words by then (speech_end), else with the final transcript.
	got := strings.Join(order, " ")
	announced := strings.HasPrefix(got, "tts:start stt llm tts:sentence_start audio")
	atFinal := strings.HasPrefix(got, "stt llm tts:start tts:sentence_start audio")
	if (!announced && !atFinal) || !strings.HasSuffix(got, "audio tts:stop") {
		t.Errorf("message order %q, want [tts:start] stt llm [tts:start] [sentence_start audio]… tts:stop", got)
	}
	if audioN == 0 || audible == 0 {
		t.Fatalf("%d audio packets (%d audible)", audioN, audible)
	}
	if firstAudio.Before(start) || lastAudio.After(stop) {
		t.Errorf("audio outside tts start..stop")
	}
	if gap := firstAudio.Sub(start); gap < 90*time.Millisecond {
		t.Errorf("first audio %v after tts start, want >= the 100 ms lead", gap)
	}
	// Paced at real time: the pipeline's 200 ms lead, the 100 ms tts start
	// lead (the pacer catches up after it) and a packet of slack.
	dur := time.Duration(audioN) * packetDur
	if span := lastAudio.Sub(firstAudio); span < dur-400*time.Millisecond {
		t.Errorf("%d packets (%v of audio) sent within %v: faster than real time", audioN, dur, span)
	}
	// tts stop follows once the audio has about played.
	if played := stop.Sub(firstAudio); played < dur-100*time.Millisecond {
		t.Errorf("tts stop %v after the first packet, before the %v of audio could play", played, dur)
	}
	t.Logf("order %s; %d packets (%v), tts start → first audio %v", summarize(msgs), audioN, dur, firstAudio.Sub(start))
}

func TestDeviceTurnProtocolVersions(t *testing.T) {
	checkLeaks(t)
	for _, v := range []int{1, 2, 3} {
		t.Run("v"+string(rune('0'+v)), func(t *testing.T) {
			ts := newTestServer(t, nil, nil)
			d := dialDevice(t, ts.wsURL(), deviceOpts{version: v})
			if h := d.hello; h.Transport != "websocket" || h.SessionID == "" || h.Version != v ||
				h.AudioParams != (serverAudioParam{Format: "opus", SampleRate: 24000, Channels: 1, FrameDuration: 60}) {
				t.Fatalf("server hello %+v", h)
			}
			from := speakTurn(t, ts, d, modeAuto, v == 1)
			d.waitFor("tts stop", from, 30*time.Second, isMsg(typeTTS, ttsStop))
			msgs := d.snapshot()[from:]
			first := msgs[0]
			if first.typ == typeTTS && first.state == ttsStart && len(msgs) > 1 {
				first = msgs[1] // announced at the end of the utterance
			}
			if first.typ != typeSTT || !strings.Contains(first.text, "weather") {
				t.Fatalf("first message of the turn %s %q, want stt of %q (a burst became a turn?)", first.typ, first.text, question)
			}
			checkTurnOrder(t, msgs, "It is sunny today.")
			if d.dropped != 0 {
				t.Errorf("%d audio packets arrived while the device was not speaking (the firmware drops them)", d.dropped)
			}
			// The session's trace has the device's playback_start (the first
			// packet written) and the history the whole answer.
			ts.obs.mu.Lock()
			traces := append([]pipeline.Trace(nil), ts.obs.traces...)
			ts.obs.mu.Unlock()
			if len(traces) != 1 {
				t.Fatalf("%d turns traced, want 1", len(traces))
			}
			marks := traces[0].SinceSpeechEnd()
			for _, m := range []string{pipeline.MarkFirstAudioOut, pipeline.MarkPlaybackStart, pipeline.MarkTurnEnd} {
				if _, ok := marks[m]; !ok {
					t.Errorf("trace without %s: %v", m, marks)
				}
			}
			d.close()
			ts.waitIdle(t)
		})
	}
}

// TestDeviceAbort interrupts the answer the way the firmware does (abort,
// then listen start once playback drained): tts stop comes at once, the
// answer's audio stops, and the history keeps only what was played.
func TestDeviceAbort(t *testing.T) {
	checkLeaks(t)
	long := "The weather today is sunny with a light breeze from the west. " +
		"In the afternoon clouds may gather over the hills and the evening will be cool. " +
		"Tomorrow looks much the same, so it is a good week for a walk in the park."
	ts := newTestServer(t, []string{long, "Sure."}, nil)
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	from := speakTurn(t, ts, d, modeAuto, false)
	first := d.waitFor("answer audio", from, 30*time.Second, isMsg("audio", ""))
	time.Sleep(600 * time.Millisecond) // about a second of it plays
	abortAt := time.Now()
	d.sendJSON(map[string]any{"type": "abort"})
	stop := d.waitFor("tts stop after abort", first, 5*time.Second, isMsg(typeTTS, ttsStop))
	msgs := d.snapshot()
	if lag := msgs[stop].at.Sub(abortAt); lag > time.Second {
		t.Errorf("tts stop %v after the abort", lag)
	}
	time.Sleep(500 * time.Millisecond)
	after := 0
	for _, m := range d.snapshot()[stop:] {
		if m.typ == "audio" {
			after++
		}
	}
	if after > 1 {
		t.Errorf("%d audio packets after tts stop", after)
	}
	// An abort with nothing playing is answered too.
	n := len(d.snapshot())
	d.sendJSON(map[string]any{"type": "abort", "reason": "wake_word_detected"})
	d.waitFor("tts stop for an idle abort", n, 5*time.Second, isMsg(typeTTS, ttsStop))

	// Next turn: the history holds the heard part of the long answer only.
	from = speakTurn(t, ts, d, modeAuto, false)
	d.waitFor("second answer's tts stop", from, 30*time.Second, isMsg(typeTTS, ttsStop))
	req := ts.model.lastRequest()
	var heard string
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			heard = m.Content
		}
	}
	if heard == "" || len(heard) >= len(long)-10 || !strings.HasPrefix(long, heard) {
		t.Errorf("history kept %q of the aborted answer, want a non-empty prefix shorter than the answer", heard)
	}
	t.Logf("heard before the abort: %q", heard)
}

// TestDeviceManual is push-to-talk: no trailing silence is sent; listen
// stop alone ends the utterance.
func TestDeviceManual(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	_, synth := engines(t)
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": "manual"})
	d.stream(speak(t, synth, question), true)
	stopAt := time.Now()
	d.sendJSON(map[string]any{"type": "listen", "state": "stop"})
	i := d.waitFor("stt after listen stop", 0, 20*time.Second, isMsg(typeSTT, ""))
	t.Logf("stt %v after listen stop", d.snapshot()[i].at.Sub(stopAt))
	d.waitFor("tts stop", i, 30*time.Second, isMsg(typeTTS, ttsStop))
	if i > 0 && isMsg(typeTTS, ttsStart)(d.snapshot()[i-1]) {
		i-- // tts start went out at the end of the utterance
	}
	checkTurnOrder(t, d.snapshot()[i:], "")
	ts.obs.mu.Lock()
	defer ts.obs.mu.Unlock()
	for _, tr := range ts.obs.traces {
		t.Logf("trace: %v", tr.SinceSpeechEnd())
	}
}

// TestDeviceRealtime keeps the microphone open through the answer; speech
// over it is a barge-in the server detects: tts stop, no more audio.
func TestDeviceRealtime(t *testing.T) {
	checkLeaks(t)
	long := "The weather today is sunny with a light breeze from the west. " +
		"In the afternoon clouds may gather over the hills and the evening will be cool."
	ts := newTestServer(t, []string{long}, nil)
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	_, synth := engines(t)
	from := speakTurn(t, ts, d, modeRealtime, false)
	d.waitFor("answer audio", from, 30*time.Second, isMsg("audio", ""))
	d.streamUntil(func() bool { return false }, 500*time.Millisecond)
	bargeAt := time.Now()
	d.stream(speak(t, synth, "stop please"), true)
	stop := d.waitFor("tts stop after barge-in", from, 10*time.Second, isMsg(typeTTS, ttsStop))
	if lag := d.snapshot()[stop].at.Sub(bargeAt); lag > 3*time.Second {
		t.Errorf("tts stop %v after the barge-in began", lag)
	}
}

// TestDeviceFasterThanRealTime sends the whole question as fast as the
// link allows (a device catching up on its send queue).
func TestDeviceFasterThanRealTime(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	_, synth := engines(t)
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": "auto"})
	pcm := append(speak(t, synth, question), make([]int16, 16000)...)
	d.stream(pcm, false)
	i := d.waitFor("stt", 0, 20*time.Second, isMsg(typeSTT, ""))
	if got := d.snapshot()[i].text; !strings.Contains(got, "weather") {
		t.Errorf("stt %q, want %q", got, question)
	}
	d.waitFor("tts stop", i, 30*time.Second, isMsg(typeTTS, ttsStop))
}

// wordlessFinals recognises with rec but ends every utterance with an empty
// final, as pocketsphinx may after partial words: the session starts no
// turn.
type wordlessFinals struct{ rec asr.Recognizer }

func (w wordlessFinals) Start(ctx context.Context, rate int) (asr.Stream, error) {
	s, err := w.rec.Start(ctx, rate)
	if err != nil {
		return nil, err
	}
	out := make(chan asr.Result, 16)
	go func() {
		defer close(out)
		for r := range s.Results() {
			if r.Final {
				r.Text = ""
			}
			out <- r
		}
	}()
	return wordlessStream{Stream: s, out: out}, nil
}

type wordlessStream struct {
	asr.Stream
	out chan asr.Result
}

func (s wordlessStream) Results() <-chan asr.Result { return s.out }

// TestDeviceAnnouncedTurnTakenBack: tts start goes out when the utterance
// ends with words heard; when the final then has none (no turn), the device
// is not left speaking with its microphone off: tts stop follows.
func TestDeviceAnnouncedTurnTakenBack(t *testing.T) {
	checkLeaks(t)
	rec, synth := engines(t)
	ts := newTestServerASR(t, wordlessFinals{rec}, nil, nil)
	d := dialDevice(t, ts.wsURL(), deviceOpts{})
	d.sendJSON(map[string]any{"type": "listen", "state": "start", "mode": modeAuto})
	d.stream(speak(t, synth, question), true)
	d.streamUntil(func() bool { return d.has(0, isMsg(typeTTS, ttsStart)) }, 20*time.Second)
	i := d.waitFor("tts start", 0, time.Second, isMsg(typeTTS, ttsStart))
	j := d.waitFor("tts stop", i, 10*time.Second, isMsg(typeTTS, ttsStop))
	msgs := d.snapshot()
	if took := msgs[j].at.Sub(msgs[i].at); took < announcedTimeout-100*time.Millisecond || took > announcedTimeout+2*time.Second {
		t.Errorf("tts stop %v after tts start, want about %v", took, announcedTimeout)
	}
	for _, m := range msgs[i:] {
		if m.typ == typeSTT || m.typ == "audio" {
			t.Errorf("%s after an utterance without words: %s", m.typ, summarize(msgs[i:]))
			break
		}
	}
	ts.model.mu.Lock()
	n := len(ts.model.requests)
	ts.model.mu.Unlock()
	if n != 0 {
		t.Errorf("%d LLM requests, want none", n)
	}
}
