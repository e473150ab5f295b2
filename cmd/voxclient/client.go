package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

type options struct {
	url, wav, out, encoding string
	json                    bool
	rate                    int
	timeout, tail           time.Duration
}

// result is what --json prints.
type result struct {
	Transcript string             `json:"transcript"`
	Answer     string             `json:"answer"`
	Turn       int                `json:"turn"`
	Trace      map[string]float64 `json:"trace"` // ms since the server's speech_end
	// VoiceToVoiceMs: first answer audio received − last speech frame sent.
	VoiceToVoiceMs *float64 `json:"voice_to_voice_ms"`
	// ServerVoiceToVoiceMs: first_audio_out − speech_end on the server.
	ServerVoiceToVoiceMs *float64 `json:"server_voice_to_voice_ms"`
	AnswerAudioMs        float64  `json:"answer_audio_ms"`
	Interrupted          bool     `json:"interrupted,omitempty"`
	// The LLM prompt of the turn: its tokens, those reused from the cache
	// and those prefilled early while the person spoke.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	EarlyTokens  int `json:"early_tokens,omitempty"`

	answerPCM []int16
	rate      int
}

// incoming is one message from the server, parsed by the reader goroutine.
type incoming struct {
	ev    *pipeline.Event
	audio []int16
	at    time.Time
}

// converse runs one turn: stream the file, collect the answer until the
// turn's trace event, end the session.
func converse(ctx context.Context, o options) (*result, error) {
	speech, err := loadSpeech(o.wav, o.rate)
	if err != nil {
		return nil, err
	}
	frame := o.rate / 50
	lastSpeech := lastSpeechFrame(speech, frame)
	speech = append(speech, make([]int16, int(o.tail.Seconds()*float64(o.rate)))...)

	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(dialCtx, o.url, nil)
	if err != nil {
		return nil, dialError(o.url, resp, err)
	}
	_ = resp.Body.Close()
	defer ws.Close()

	if err := ws.WriteJSON(map[string]any{
		"type": "start", "sample_rate": o.rate, "encoding": o.encoding, "output_sample_rate": o.rate,
		"client": map[string]string{"name": "voxclient", "version": version},
	}); err != nil {
		return nil, fmt.Errorf("send start: %w", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ready pipeline.Event
	if err := ws.ReadJSON(&ready); err != nil {
		return nil, fmt.Errorf("waiting for ready: %w", err)
	}
	if ready.Type != pipeline.EventReady {
		return nil, fmt.Errorf("server refused the session: %s: %s", ready.Code, ready.Message)
	}
	_ = ws.SetReadDeadline(time.Time{})

	var enc *audio.OpusEncoder
	var dec *audio.OpusDecoder
	if o.encoding == "opus" {
		if enc, err = audio.NewOpusEncoder(o.rate, 32000); err != nil {
			return nil, err
		}
		if dec, err = audio.NewOpusDecoder(o.rate); err != nil {
			return nil, err
		}
	}

	msgs := make(chan incoming, 256)
	readDone := make(chan error, 1)
	go func() { readDone <- readLoop(ws, dec, msgs) }()

	c := &session{o: o, ws: ws, enc: enc, res: &result{rate: o.rate}, log: os.Stderr}
	if o.json {
		c.log = io.Discard
	}
	err = c.loop(ctx, speech, frame, lastSpeech, msgs)

	// End the session politely and let the reader see the close.
	_ = ws.WriteJSON(map[string]string{"type": "stop"})
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	for range msgs {
	}
	<-readDone
	if err != nil {
		return nil, err
	}
	if o.out != "" {
		if err := saveWAV(o.out, c.res.answerPCM, o.rate); err != nil {
			return nil, err
		}
	}
	return c.res, nil
}

// readLoop is the connection's only reader; it closes msgs when the
// connection ends.
func readLoop(ws *websocket.Conn, dec *audio.OpusDecoder, msgs chan<- incoming) error {
	defer close(msgs)
	pcm := make([]int16, 5760) // 120 ms at 48 kHz, the longest Opus packet
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				return nil
			}
			return err
		}
		now := time.Now()
		if typ == websocket.BinaryMessage {
			var samples []int16
			if dec != nil {
				n, err := dec.Decode(data, pcm)
				if err != nil {
					return fmt.Errorf("answer audio: %w", err)
				}
				samples = append([]int16(nil), pcm[:n]...)
			} else {
				samples = make([]int16, len(data)/2)
				for i := range samples {
					samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
				}
			}
			msgs <- incoming{audio: samples, at: now}
			continue
		}
		var ev pipeline.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad event %q: %w", data, err)
		}
		msgs <- incoming{ev: &ev, at: now}
	}
}

// session is the writer side: the microphone and the player. Only loop's
// goroutine writes to ws.
type session struct {
	o   options
	ws  *websocket.Conn
	enc *audio.OpusEncoder
	res *result
	log io.Writer

	answerTurn     int
	speechEndSent  time.Time
	firstAudio     time.Time
	turnFirstAudio map[int]time.Time
	turnSamples    map[int]int
	printedAnswer  bool
}

func (c *session) loop(ctx context.Context, speech []int16, frame, lastSpeech int, msgs <-chan incoming) error {
	c.turnFirstAudio, c.turnSamples = map[int]time.Time{}, map[int]int{}
	silence := make([]int16, frame)
	packet := make([]byte, audio.MaxOpusPacket)
	pcmBuf := make([]byte, 2*frame)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var audioDone time.Time
	next := 0 // next frame of speech to send
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			// The microphone keeps streaming (silence after the file), as a
			// device's would.
			pcm := silence
			if (next+1)*frame <= len(speech) {
				pcm = speech[next*frame : (next+1)*frame]
				if next == lastSpeech {
					c.speechEndSent = time.Now()
				}
				next++
			} else if audioDone.IsZero() {
				audioDone = time.Now()
			}
			if !audioDone.IsZero() && time.Since(audioDone) > c.o.timeout {
				return fmt.Errorf("no end of turn within %v after the audio was sent (transcript so far %q)", c.o.timeout, c.res.Transcript)
			}
			payload := pcmBuf
			if c.enc != nil {
				n, err := c.enc.Encode(pcm, packet)
				if err != nil {
					return err
				}
				payload = packet[:n]
			} else {
				for i, s := range pcm {
					binary.LittleEndian.PutUint16(pcmBuf[2*i:], uint16(s))
				}
			}
			if err := c.ws.WriteMessage(websocket.BinaryMessage, payload); err != nil {
				return fmt.Errorf("send audio: %w", err)
			}
		case m, ok := <-msgs:
			if !ok {
				return errors.New("server closed the connection before the turn ended")
			}
			done, err := c.handle(m)
			if err != nil || done {
				return err
			}
		}
	}
}

// handle reacts to one server message; done is true after our turn's trace.
func (c *session) handle(m incoming) (done bool, err error) {
	if m.audio != nil {
		turn := c.answerTurn
		if c.turnFirstAudio[turn].IsZero() {
			c.turnFirstAudio[turn] = m.at
			if err := c.ws.WriteJSON(map[string]any{"type": "playback_start", "turn": turn}); err != nil {
				return false, err
			}
		}
		if c.firstAudio.IsZero() && turn == c.res.Turn {
			c.firstAudio = m.at
			if !c.speechEndSent.IsZero() {
				v := float64(m.at.Sub(c.speechEndSent).Microseconds()) / 1000
				c.res.VoiceToVoiceMs = &v
			}
		}
		c.turnSamples[turn] += len(m.audio)
		if turn == c.res.Turn {
			c.res.answerPCM = append(c.res.answerPCM, m.audio...)
		}
		return false, nil
	}
	ev := m.ev
	switch ev.Type {
	case pipeline.EventTranscript:
		if c.res.Turn == 0 {
			c.res.Turn = ev.Turn
		}
		if ev.Turn != c.res.Turn {
			return false, nil
		}
		if ev.Final {
			c.res.Transcript = ev.Text
			fmt.Fprintf(c.log, "\r\033[Kyou: %s\n", ev.Text)
		} else {
			fmt.Fprintf(c.log, "\r\033[K… %s", ev.Text)
		}
	case pipeline.EventAnswer:
		c.answerTurn = ev.Turn
		if ev.Turn != c.res.Turn {
			return false, nil
		}
		if !c.printedAnswer {
			fmt.Fprint(c.log, "bot: ")
			c.printedAnswer = true
		}
		c.res.Answer += ev.Text
		fmt.Fprint(c.log, ev.Text)
		if ev.Final {
			fmt.Fprintln(c.log)
		}
	case pipeline.EventInterrupted:
		// We "play" audio as it arrives: what we heard is what arrived, and
		// no more than real time since the first frame.
		got := float64(c.turnSamples[ev.Turn]) * 1000 / float64(c.o.rate)
		played := got
		if t := c.turnFirstAudio[ev.Turn]; !t.IsZero() {
			played = math.Min(got, float64(time.Since(t).Milliseconds()))
		}
		if err := c.ws.WriteJSON(map[string]any{"type": "interrupt", "turn": ev.Turn, "played_ms": played}); err != nil {
			return false, err
		}
	case pipeline.EventTrace:
		if ev.Turn != c.res.Turn || c.res.Turn == 0 {
			return false, nil
		}
		c.res.Trace = ev.Marks
		c.res.ServerVoiceToVoiceMs = ev.VoiceToVoiceMs
		c.res.Interrupted = ev.Interrupted
		c.res.PromptTokens, c.res.CachedTokens, c.res.EarlyTokens = ev.PromptTokens, ev.CachedTokens, ev.EarlyTokens
		c.res.AnswerAudioMs = float64(len(c.res.answerPCM)) * 1000 / float64(c.o.rate)
		return true, nil
	case pipeline.EventError:
		switch ev.Code {
		case pipeline.CodeBackend, pipeline.CodeBusy:
			fmt.Fprintf(c.log, "server: %s: %s\n", ev.Code, ev.Message)
		default: // a protocol error is this client's bug or a mismatch: stop
			return false, fmt.Errorf("server error %s: %s", ev.Code, ev.Message)
		}
	}
	return false, nil
}

// loadSpeech reads a PCM16 WAV and returns it mono at rate.
func loadSpeech(path string, rate int) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := audio.DecodeWAV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pcm := w.Mono()
	if w.SampleRate == rate {
		return pcm, nil
	}
	r, err := audio.NewResampler(w.SampleRate, rate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A few ms of zeros flush the filter's delay.
	pcm = append(pcm, make([]int16, w.SampleRate/100)...)
	return append([]int16(nil), r.Process(nil, pcm)...), nil
}

// lastSpeechFrame returns the index of the last frame whose energy is
// within 30 dB of the loudest frame (and above -60 dBFS): the client's
// estimate of where speech ends in the file.
func lastSpeechFrame(pcm []int16, frame int) int {
	n := len(pcm) / frame
	energy := make([]float64, n)
	peak := -200.0
	for i := range n {
		var sum float64
		for _, s := range pcm[i*frame : (i+1)*frame] {
			sum += float64(s) * float64(s)
		}
		energy[i] = 10 * math.Log10(sum/float64(frame)/(32768*32768)+1e-12)
		peak = max(peak, energy[i])
	}
	threshold := max(peak-30, -60)
	for i := n - 1; i >= 0; i-- {
		if energy[i] >= threshold {
			return i
		}
	}
	return n - 1
}

func saveWAV(path string, pcm []int16, rate int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := audio.EncodeWAV(f, pcm, rate, 1); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

func dialError(url string, resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer resp.Body.Close()
	var ev pipeline.Event
	if json.NewDecoder(resp.Body).Decode(&ev) == nil && ev.Message != "" {
		return fmt.Errorf("connect %s: HTTP %d: %s: %s", url, resp.StatusCode, ev.Code, ev.Message)
	}
	return fmt.Errorf("connect %s: HTTP %d: %w", url, resp.StatusCode, err)
}

func printJSON(w io.Writer, r *result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func printSummary(w io.Writer, r *result) {
	marks := make([]string, 0, len(r.Trace))
	for name := range r.Trace {
		marks = append(marks, name)
	}
	sort.Slice(marks, func(i, j int) bool { return r.Trace[marks[i]] < r.Trace[marks[j]] })
	var b strings.Builder
	for _, name := range marks {
		fmt.Fprintf(&b, "  %-18s %8.1f ms\n", name, r.Trace[name])
	}
	fmt.Fprintf(w, "trace (ms since the server's speech_end):\n%s", b.String())
	if r.ServerVoiceToVoiceMs != nil {
		fmt.Fprintf(w, "voice-to-voice, server (first_audio_out - speech_end): %.0f ms\n", *r.ServerVoiceToVoiceMs)
	}
	if r.VoiceToVoiceMs != nil {
		fmt.Fprintf(w, "voice-to-voice, client (first answer audio - last speech sent): %.0f ms\n", *r.VoiceToVoiceMs)
	}
	fmt.Fprintf(w, "answer audio: %.1f s\n", r.AnswerAudioMs/1000)
}
