package web

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// liveClient behaves like a smart speaker: its microphone streams 20 ms
// frames at real-time pace for the whole session (silence unless say gave
// it speech), it "plays" answer audio as it arrives (playback_start on the
// first frame of a turn) and answers an interrupted event with how much it
// played.
type liveClient struct {
	t        *testing.T
	ws       *websocket.Conn
	rate     int
	encoding string

	writeMu sync.Mutex // gorilla allows one writer: the mic and the player share it

	speech chan []int16        // say → mic
	events chan pipeline.Event // reader → test; closed by the reader
	cancel context.CancelFunc  // stops the mic
	wg     sync.WaitGroup      // the mic and the reader

	mu          sync.Mutex // guards the fields below (written by the reader)
	answerTurn  int        // turn of the latest answer event: frames belong to it
	framesBy    map[int]int
	firstFrame  map[int]time.Time
	samplesRecv int
}

func newLiveClient(t *testing.T, url string, rate int, encoding string) *liveClient {
	t.Helper()
	c := &liveClient{
		t: t, ws: dial(t, url), rate: rate, encoding: encoding,
		speech:     make(chan []int16, 4),
		events:     make(chan pipeline.Event, 1024),
		framesBy:   map[int]int{},
		firstFrame: map[int]time.Time{},
	}
	start := startMsg(rate, encoding)
	sendJSON(t, c.ws, start)
	if ev := expectReady(t, c.ws); ev.SampleRate != rate || ev.Encoding != encoding {
		t.Fatalf("ready %+v, want %s at %d Hz", ev, encoding, rate)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() { c.mic(ctx) })
	c.wg.Go(c.read)
	t.Cleanup(c.close)
	return c
}

// say queues speech for the microphone.
func (c *liveClient) say(pcm []int16) { c.speech <- pcm }

// close stops the mic, ends the session and waits for the client's
// goroutines.
func (c *liveClient) close() {
	c.cancel()
	c.writeMu.Lock()
	_ = c.ws.WriteJSON(map[string]any{"type": "stop"})
	c.writeMu.Unlock()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	c.wg.Wait()
}

func (c *liveClient) write(typ int, data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.ws.WriteMessage(typ, data)
}

// mic sends one 20 ms frame per tick: queued speech, else silence.
func (c *liveClient) mic(ctx context.Context) {
	frame := c.rate / 50
	var enc *audio.OpusEncoder
	var packet []byte
	if c.encoding == EncodingOpus {
		var err error
		if enc, err = audio.NewOpusEncoder(c.rate, 32000); err != nil {
			c.t.Errorf("opus encoder: %v", err)
			return
		}
		packet = make([]byte, audio.MaxOpusPacket)
	}
	paceMic(ctx, c.speech, frame, func(pcm []int16) error {
		payload := pcmBytes(pcm)
		if enc != nil {
			n, err := enc.Encode(pcm, packet)
			if err != nil {
				c.t.Errorf("opus encode: %v", err)
				return err
			}
			payload = packet[:n]
		}
		return c.write(websocket.BinaryMessage, payload) // fails once the connection closes
	})
}

// read is the connection's only reader.
func (c *liveClient) read() {
	defer close(c.events)
	var dec *audio.OpusDecoder
	pcm := make([]int16, maxOpusFrameSamples)
	if c.encoding == EncodingOpus {
		var err error
		if dec, err = audio.NewOpusDecoder(c.rate); err != nil {
			c.t.Errorf("opus decoder: %v", err)
			return
		}
	}
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if typ == websocket.BinaryMessage {
			n := len(data) / 2
			if dec != nil {
				if n, err = dec.Decode(data, pcm); err != nil {
					c.t.Errorf("answer audio: undecodable opus packet: %v", err)
					return
				}
			}
			c.mu.Lock()
			turn := c.answerTurn
			c.framesBy[turn]++
			c.samplesRecv += n
			first := c.firstFrame[turn].IsZero()
			if first {
				c.firstFrame[turn] = time.Now()
			}
			c.mu.Unlock()
			if first {
				_ = c.write(websocket.TextMessage, mustJSON(map[string]any{"type": "playback_start", "turn": turn}))
			}
			continue
		}
		var ev pipeline.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			c.t.Errorf("bad event %q: %v", data, err)
			return
		}
		switch ev.Type {
		case pipeline.EventAnswer:
			c.mu.Lock()
			c.answerTurn = ev.Turn
			c.mu.Unlock()
		case pipeline.EventInterrupted:
			// Stop "playing" and report how much was heard: what arrived,
			// but no more than real time since the first frame.
			c.mu.Lock()
			got := float64(c.framesBy[ev.Turn]) * FrameMs
			played := min(got, float64(time.Since(c.firstFrame[ev.Turn]).Milliseconds()))
			c.mu.Unlock()
			_ = c.write(websocket.TextMessage, mustJSON(map[string]any{"type": "interrupt", "turn": ev.Turn, "played_ms": played}))
		}
		c.events <- ev
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// until returns events up to and including the first one match accepts.
func (c *liveClient) until(what string, match func(pipeline.Event) bool) []pipeline.Event {
	c.t.Helper()
	timeout := time.After(90 * time.Second)
	var got []pipeline.Event
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatalf("connection closed waiting for %s; events: %+v", what, got)
			}
			got = append(got, ev)
			if ev.Type == pipeline.EventError {
				c.t.Fatalf("error event waiting for %s: %+v", what, ev)
			}
			if match(ev) {
				return got
			}
		case <-timeout:
			c.t.Fatalf("no %s within 90 s; events: %+v", what, got)
		}
	}
}

func (c *liveClient) frames(turn int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.framesBy[turn]
}

// waitFrames waits until n answer frames of turn arrived (events keep
// queueing meanwhile).
func (c *liveClient) waitFrames(turn, n int) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for c.frames(turn) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("only %d answer frames of turn %d within 90 s", c.frames(turn), turn)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func traceOf(turn int) func(pipeline.Event) bool {
	return func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace && ev.Turn == turn }
}

// utterance returns text spoken by flite, resampled to rate, after 0.3 s of
// silence (the VAD learns the noise floor).
func utterance(t *testing.T, text string, rate int) []int16 {
	t.Helper()
	_, synth := engines(t)
	pcm := speak(t, synth, text)
	if rate != synth.SampleRate() {
		r, err := audio.NewResampler(synth.SampleRate(), rate)
		if err != nil {
			t.Fatal(err)
		}
		pcm = append([]int16(nil), r.Process(nil, append(pcm, make([]int16, 64)...))...)
	}
	return append(make([]int16, rate*3/10), pcm...)
}

// TestEndToEnd speaks a question (flite) into a real server (pocketsphinx,
// scripted LLM, flite) over the WebSocket at real-time pace and checks the
// transcript, the answer text and audio, and the latency trace.
func TestEndToEnd(t *testing.T) {
	const question = "what is the weather like today"
	const answer = "It is sunny and warm today. Enjoy the day."
	for _, tc := range []struct {
		encoding string
		rate     int
	}{{EncodingPCM16, 24000}, {EncodingOpus, 48000}} {
		t.Run(tc.encoding, func(t *testing.T) {
			checkLeaks(t)
			ts := newTestServer(t, []string{answer}, nil)
			c := newLiveClient(t, ts.url, tc.rate, tc.encoding)
			c.say(utterance(t, question, tc.rate))
			events := c.until("trace of turn 1", traceOf(1))

			var transcript, answerText strings.Builder
			var trace pipeline.Event
			answerFinal := false
			for _, ev := range events {
				switch ev.Type {
				case pipeline.EventTranscript:
					if ev.Final {
						transcript.WriteString(ev.Text)
					}
				case pipeline.EventAnswer:
					answerText.WriteString(ev.Text)
					answerFinal = answerFinal || ev.Final
				case pipeline.EventTrace:
					trace = ev
				}
			}
			ref, hyp := asrtest.Words(question), asrtest.Words(transcript.String())
			if errs, n := asrtest.WER(ref, hyp); float64(errs)/float64(n) > 0.5 {
				t.Errorf("transcript %q: WER %d/%d against %q", transcript.String(), errs, n, question)
			}
			if got := strings.Join(strings.Fields(answerText.String()), " "); got != answer {
				t.Errorf("answer %q, want %q", got, answer)
			}
			if !answerFinal {
				t.Error("no answer event with final set")
			}
			// The answer's audio: about as long as flite makes it.
			wantFrames := len(utterance(t, answer, tc.rate)) / (tc.rate / 50)
			if got := c.frames(1); got < wantFrames/2 {
				t.Errorf("%d answer frames, want about %d", got, wantFrames)
			}
			checkTraceOrder(t, trace)
			if trace.VoiceToVoiceMs == nil || *trace.VoiceToVoiceMs <= 0 {
				t.Errorf("trace without a positive voice_to_voice_ms: %+v", trace)
			} else {
				t.Logf("%s: voice-to-voice %.0f ms; marks %v", tc.encoding, *trace.VoiceToVoiceMs, trace.Marks)
			}
			// /metrics saw the turn (the session reports it right after
			// sending the trace event).
			for deadline := time.Now().Add(10 * time.Second); metricValue(t, ts.srv.metrics, "voxpipe_voice_to_voice_seconds", "") < 1; {
				if time.Now().After(deadline) {
					t.Fatal("voxpipe_voice_to_voice_seconds never observed the turn")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := metricValue(t, ts.srv.metrics, "voxpipe_asr_final_seconds", ""); n != 1 {
				t.Errorf("voxpipe_asr_final_seconds has %v observations, want 1", n)
			}
			// ... labelled with the transport it came over.
			if n := metricValue(t, ts.srv.metrics, "voxpipe_transport_voice_to_voice_seconds", transportWS); n != 1 {
				t.Errorf("voxpipe_transport_voice_to_voice_seconds{transport=websocket} has %v observations, want 1", n)
			}
			if n := metricValue(t, ts.srv.metrics, "voxpipe_transport_voice_to_voice_seconds", transportWebRTC); n != 0 {
				t.Errorf("voxpipe_transport_voice_to_voice_seconds{transport=webrtc} has %v observations, want 0", n)
			}
			// The LLM was asked the transcript.
			ts.model.mu.Lock()
			reqs := append([]llm.Request(nil), ts.model.requests...)
			ts.model.mu.Unlock()
			if len(reqs) != 1 {
				t.Fatalf("%d LLM requests, want 1", len(reqs))
			}
			last := reqs[0].Messages[len(reqs[0].Messages)-1]
			if last.Role != llm.RoleUser || last.Content != transcript.String() {
				t.Errorf("LLM asked %+v, want the user message %q", last, transcript.String())
			}
		})
	}
}

// checkTraceOrder asserts the marks a completed turn must have, in the
// causal order of pipeline.MarkOrder. A speculative answer started on the
// pause, before the final transcript: its LLM and TTS marks follow
// speech_end but may precede asr_final, and its audio, held until the
// commit, follows both.
func checkTraceOrder(t *testing.T, trace pipeline.Event) {
	t.Helper()
	for _, m := range []string{
		pipeline.MarkSpeechStart, pipeline.MarkSpeechEnd, pipeline.MarkASRFinal, pipeline.MarkLLMRequest,
		pipeline.MarkLLMFirstToken, pipeline.MarkTTSFirstChunk, pipeline.MarkTTSFirstAudio,
		pipeline.MarkFirstAudioOut, pipeline.MarkTurnEnd,
	} {
		if _, ok := trace.Marks[m]; !ok {
			t.Errorf("trace lacks %s: %v", m, trace.Marks)
		}
	}
	if !trace.Speculative {
		checkMarksInOrder(t, trace, pipeline.MarkOrder)
	} else {
		answer := []string{pipeline.MarkLLMRequest, pipeline.MarkLLMFirstToken, pipeline.MarkTTSFirstChunk, pipeline.MarkTTSFirstAudio}
		var rest []string
		for _, m := range pipeline.MarkOrder {
			if !slices.Contains(answer, m) {
				rest = append(rest, m)
			}
		}
		checkMarksInOrder(t, trace, rest)
		checkMarksInOrder(t, trace, append(append([]string{pipeline.MarkSpeechEnd}, answer...), pipeline.MarkFirstAudioOut))
	}
	if ps, ok := trace.Marks[pipeline.MarkPlaybackStart]; ok && ps < trace.Marks[pipeline.MarkFirstAudioOut] {
		t.Errorf("playback_start %.1f ms before first_audio_out %.1f ms", ps, trace.Marks[pipeline.MarkFirstAudioOut])
	}
}

// checkMarksInOrder asserts that trace's marks among order, where present,
// come in that order (asr_first_partial and playback_start excepted).
func checkMarksInOrder(t *testing.T, trace pipeline.Event, order []string) {
	t.Helper()
	prev, prevName := -1e18, ""
	for _, m := range order {
		ms, ok := trace.Marks[m]
		if !ok || m == pipeline.MarkASRFirstPartial || m == pipeline.MarkPlaybackStart {
			continue // a partial may come before speech_end; playback_start is the client's clock
		}
		if ms < prev {
			t.Errorf("trace out of order: %s at %.1f ms before %s at %.1f ms", m, ms, prevName, prev)
		}
		prev, prevName = ms, m
	}
}

// TestBargeIn speaks over a long answer: the server sends interrupted, the
// client reports what it played, the rest of the answer is never sent, and
// the history keeps only what was heard.
func TestBargeIn(t *testing.T) {
	checkLeaks(t)
	const long = "Once upon a time there was a little robot who loved to sing. " +
		"Every morning it climbed the hill behind the village and sang to the sun. " +
		"The birds came to listen, and the farmers stopped their work to hear it. " +
		"One day a storm came, and the robot sang louder than the thunder. " +
		"After that day everyone in the village learned the robot's song."
	ts := newTestServer(t, []string{long, "Okay."}, nil)
	const rate = 16000
	c := newLiveClient(t, ts.url, rate, EncodingPCM16)
	c.say(utterance(t, "tell me a story", rate))

	// Wait until the answer is playing, then talk over it.
	c.waitFrames(1, 25) // half a second of it
	c.say(utterance(t, "stop please wait", rate))
	events := c.until("trace of turn 1", traceOf(1))

	var interrupted, trace *pipeline.Event
	for i := range events {
		switch events[i].Type {
		case pipeline.EventInterrupted:
			interrupted = &events[i]
		case pipeline.EventTrace:
			trace = &events[i]
		}
	}
	if interrupted == nil || interrupted.Turn != 1 {
		t.Fatalf("no interrupted event for turn 1 before its trace: %+v", events)
	}
	if !trace.Interrupted {
		t.Errorf("trace of turn 1 not marked interrupted: %+v", trace)
	}
	// The barge-in speech becomes turn 2; its (short) answer completes.
	c.until("trace of turn 2", traceOf(2))

	fullFrames := len(utterance(t, long, rate)) / (rate / 50)
	if got := c.frames(1); got > fullFrames*6/10 {
		t.Errorf("turn 1 sent %d frames of about %d: the audio did not stop", got, fullFrames)
	}
	// The second request's history holds the first answer cut to what was
	// played.
	ts.model.mu.Lock()
	reqs := append([]llm.Request(nil), ts.model.requests...)
	ts.model.mu.Unlock()
	if len(reqs) < 2 {
		t.Fatalf("%d LLM requests, want 2", len(reqs))
	}
	var kept string
	for _, m := range reqs[1].Messages {
		if m.Role == llm.RoleAssistant {
			kept = m.Content
		}
	}
	if len(kept) >= len(long) || !strings.HasPrefix(long, strings.TrimSpace(strings.TrimSuffix(kept, "…"))) {
		t.Errorf("history kept %q of the interrupted answer, want a strict prefix of it", kept)
	}
	t.Logf("turn 1: %d of ~%d frames sent; history kept %q", c.frames(1), fullFrames, kept)
}
