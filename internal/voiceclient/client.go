package voiceclient

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Config says how to talk to the server.
type Config struct {
	URL      string      // ws://HOST:PORT/ws
	Header   http.Header // sent with the upgrade (Authorization, Origin); may be nil
	Encoding string      // "pcm16" (default) or "opus", both ways
	Rate     int         // sample rate both ways; 0: 16000 for pcm16, 48000 for opus
	// Turns stops after this many traced turns; 0 streams all the speech
	// and waits for the trace of every turn it produced.
	Turns int
	// Tail is silence sent after the speech, so the server's endpointing
	// ends the last utterance; 0 means 1.5 s.
	Tail time.Duration
	// Timeout bounds the wait for the last turn once the audio (and tail)
	// has been sent; 0 means 60 s.
	Timeout time.Duration
	// KeepAudio keeps each turn's answer audio in Turn.Audio.
	KeepAudio bool
	// Log, when set, gets transcripts and answers as they stream.
	Log io.Writer
	// Client names this client in the start message.
	ClientName, ClientVersion string
	// Device is the start message's device id ("" = none): the server
	// remembers the speaker of a device from one session to the next.
	Device string
}

// Turn is one answered turn.
type Turn struct {
	Turn       int                `json:"turn"`
	Transcript string             `json:"transcript"`
	Answer     string             `json:"answer"`
	Trace      map[string]float64 `json:"trace"` // ms since the server's speech_end
	// VoiceToVoiceMs: the first answer frame's arrival minus the end of the
	// last audible speech sent.
	VoiceToVoiceMs *float64 `json:"voice_to_voice_ms"`
	// HeardMs: when the answer's first audible sample played minus the end
	// of the last audible speech sent: what a listener waits.
	HeardMs *float64 `json:"heard_ms"`
	// HeardAfterFinalMs: when the first audible answer sample played minus
	// when the final transcript arrived (the path after recognition).
	HeardAfterFinalMs *float64 `json:"heard_after_final_ms,omitempty"`
	// The server's own figures from the trace event.
	ServerVoiceToVoiceMs *float64 `json:"server_voice_to_voice_ms"`
	ServerHeardMs        *float64 `json:"server_heard_ms,omitempty"`
	AnswerAudioMs        float64  `json:"answer_audio_ms"`
	Interrupted          bool     `json:"interrupted,omitempty"`
	PromptTokens         int      `json:"prompt_tokens,omitempty"`
	CachedTokens         int      `json:"cached_tokens,omitempty"`
	EarlyTokens          int      `json:"early_tokens,omitempty"`
	// How the server decided the end of the turn (eou_score,
	// end_silence_ms, intonation, ...), as its trace event said.
	pipeline.EndOfTurn
	// Audio is the answer at Config.Rate (with Config.KeepAudio).
	Audio []int16 `json:"-"`
}

// Result is every turn of one Run, in order.
type Result struct {
	Turns []Turn
	// AudioRate is the rate of Turn.Audio (the answer audio's).
	AudioRate int
}

// Defaults for Config's zero values.
const (
	DefaultTail    = 1500 * time.Millisecond
	DefaultTimeout = 60 * time.Second
	// partialGrace is how long, after the audio ended, a partial transcript
	// may wait for its final (a loaded recogniser can take seconds): one
	// that never comes was noise.
	partialGrace = 10 * time.Second
	// speechEndSlack: the server's speech_end is where its VAD put the end
	// of speech (backdated from its decision); the last audible sample may
	// lie a little later (a soft word end the VAD counts as silence). The
	// VAD saw at least its end silence (160-500 ms) after it, so the next
	// utterance cannot start within this.
	speechEndSlack = 150 * time.Millisecond
)

// ErrRefused is returned when the server refuses the session (HTTP error
// or an error event instead of ready).
var ErrRefused = errors.New("voiceclient: session refused")

func (cfg Config) withDefaults() (Config, error) {
	switch cfg.Encoding {
	case "", "pcm16":
		cfg.Encoding = "pcm16"
		if cfg.Rate == 0 {
			cfg.Rate = 16000
		}
	case "opus":
		if cfg.Rate == 0 {
			cfg.Rate = 48000
		}
	default:
		return cfg, fmt.Errorf("voiceclient: encoding %q (want pcm16 or opus)", cfg.Encoding)
	}
	if cfg.Rate%50 != 0 || cfg.Rate <= 0 {
		return cfg, fmt.Errorf("voiceclient: rate %d Hz (want a positive multiple of 50)", cfg.Rate)
	}
	if cfg.Tail == 0 {
		cfg.Tail = DefaultTail
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "voiceclient"
	}
	return cfg, nil
}

// Run opens a session, streams speech (mono PCM16 at cfg.Rate) in real time
// followed by cfg.Tail of silence, and returns every turn once its trace
// came (or after cfg.Turns turns). On a timeout or a broken connection it
// returns the turns finished so far with the error.
func Run(ctx context.Context, cfg Config, speech []int16) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(dialCtx, cfg.URL, cfg.Header)
	if err != nil {
		return nil, dialError(cfg.URL, resp, err)
	}
	_ = resp.Body.Close()
	defer ws.Close()

	start := map[string]any{
		"type": "start", "sample_rate": cfg.Rate, "encoding": cfg.Encoding, "output_sample_rate": cfg.Rate,
		"client": map[string]string{"name": cfg.ClientName, "version": cfg.ClientVersion},
	}
	if cfg.Device != "" {
		start["device"] = cfg.Device
	}
	if err := ws.WriteJSON(start); err != nil {
		return nil, fmt.Errorf("voiceclient: send start: %w", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ready pipeline.Event
	if err := ws.ReadJSON(&ready); err != nil {
		return nil, fmt.Errorf("voiceclient: waiting for ready: %w", err)
	}
	if ready.Type != pipeline.EventReady {
		return nil, fmt.Errorf("%w: %s: %s", ErrRefused, ready.Code, ready.Message)
	}
	_ = ws.SetReadDeadline(time.Time{})

	s := &session{cfg: cfg, ws: ws, meter: NewMeter(cfg.Rate, cfg.Rate), turns: map[int]*Turn{}, finalAt: map[int]time.Time{},
		free: make(chan []int16, 64)}
	if cfg.Encoding == "opus" {
		if s.enc, err = audio.NewOpusEncoder(cfg.Rate, 32000); err != nil {
			return nil, err
		}
		if s.dec, err = audio.NewOpusDecoder(cfg.Rate); err != nil {
			return nil, err
		}
	}
	msgs := make(chan incoming, 64)
	readDone := make(chan error, 1)
	go func() { readDone <- s.read(msgs) }()

	err = s.loop(ctx, speech, msgs)

	// End the session politely and let the reader see the close.
	_ = ws.WriteJSON(map[string]string{"type": pipeline.ClientStop})
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	for m := range msgs {
		s.recycle(m)
	}
	rerr := <-readDone
	if ctx.Err() != nil {
		err = ctx.Err() // the closed connection is a consequence
	} else if err == nil && rerr != nil && !s.done {
		err = rerr
	}
	return s.result(), err
}

// incoming is one message from the server, parsed by the reader.
type incoming struct {
	ev    *pipeline.Event
	audio []int16 // from session.free; handed back by recycle
	at    time.Time
}

// session is one Run. The loop goroutine owns everything but free and the
// reader's buffers; only it writes to ws.
type session struct {
	cfg   Config
	ws    *websocket.Conn
	enc   *audio.OpusEncoder
	dec   *audio.OpusDecoder
	meter *Meter
	free  chan []int16 // audio buffers the loop handed back to the reader

	turns      map[int]*Turn
	finalAt    map[int]time.Time // when each turn's final transcript arrived
	order      []int             // turn ids in the order they were finalized
	traced     int
	answerTurn int
	printed    map[int]bool
	partialAt  time.Time // last partial without a final yet; zero if none
	done       bool
}

// read is the connection's only reader; it closes msgs when the connection
// ends, after a message carrying the error (nil on a normal close).
func (s *session) read(msgs chan<- incoming) error {
	defer close(msgs)
	var data []byte
	for {
		typ, r, err := s.ws.NextReader()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				return nil
			}
			return err
		}
		data, err = readAll(r, data[:0])
		if err != nil {
			return err
		}
		now := time.Now()
		if typ == websocket.BinaryMessage {
			pcm, err := s.decode(data)
			if err != nil {
				return err
			}
			msgs <- incoming{audio: pcm, at: now}
			continue
		}
		var ev pipeline.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("voiceclient: bad event %q: %w", data, err)
		}
		msgs <- incoming{ev: &ev, at: now}
	}
}

// decode turns one binary message into PCM in a recycled buffer.
func (s *session) decode(data []byte) ([]int16, error) {
	var pcm []int16
	select {
	case pcm = <-s.free:
	default:
		pcm = make([]int16, 0, s.cfg.Rate*120/1000) // the longest Opus packet
	}
	if s.dec != nil {
		pcm = pcm[:cap(pcm)]
		n, err := s.dec.Decode(data, pcm)
		if err != nil {
			return nil, fmt.Errorf("voiceclient: answer audio: %w", err)
		}
		return pcm[:n], nil
	}
	if len(data)%2 != 0 {
		return nil, fmt.Errorf("voiceclient: answer audio of %d bytes is not PCM16", len(data))
	}
	pcm = pcm[:0]
	for i := 0; i+1 < len(data); i += 2 {
		pcm = append(pcm, int16(binary.LittleEndian.Uint16(data[i:])))
	}
	return pcm, nil
}

func (s *session) recycle(m incoming) {
	if m.audio == nil {
		return
	}
	select {
	case s.free <- m.audio[:0]:
	default:
	}
}

func (s *session) loop(ctx context.Context, speech []int16, msgs <-chan incoming) error {
	frame := s.cfg.Rate / 50
	silence := make([]int16, frame)
	packet := make([]byte, audio.MaxOpusPacket)
	pcmBuf := make([]byte, 2*frame)
	tailFrames := int(s.cfg.Tail / (20 * time.Millisecond))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var audioDone time.Time
	next := 0 // frames sent
	total := (len(speech)+frame-1)/frame + tailFrames
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			if !audioDone.IsZero() {
				if s.finished(now, audioDone) {
					s.done = true
					return nil
				}
				if now.Sub(audioDone) > s.cfg.Timeout {
					return fmt.Errorf("voiceclient: %d of %d turns traced %v after the audio was sent", s.traced, len(s.order), s.cfg.Timeout)
				}
			}
			// The microphone keeps streaming (silence after the speech),
			// as a device's would.
			pcm := silence
			if next*frame < len(speech) {
				pcm = speech[next*frame : min((next+1)*frame, len(speech))]
				if len(pcm) < frame {
					pcm = append(silence[:0:0], pcm...)
					pcm = append(pcm, silence[len(pcm):]...)
				}
			}
			next++
			if next == total {
				audioDone = time.Now()
			}
			if err := s.send(pcm, packet, pcmBuf); err != nil {
				return err
			}
			s.meter.Sent(pcm, time.Now())
		case m, ok := <-msgs:
			if !ok {
				return errors.New("voiceclient: the server closed the connection before the last turn ended")
			}
			err := s.handle(m)
			s.recycle(m)
			if err != nil {
				return err
			}
			if s.cfg.Turns > 0 && s.traced >= s.cfg.Turns {
				s.done = true
				return nil
			}
		}
	}
}

// finished: the audio is out, every finalized turn traced, and no partial
// transcript is still waiting for its final.
func (s *session) finished(now, audioDone time.Time) bool {
	if !s.partialAt.IsZero() && now.Sub(later(s.partialAt, audioDone)) < partialGrace {
		return false
	}
	return len(s.order) > 0 && s.traced == len(s.order)
}

func (s *session) send(pcm []int16, packet, pcmBuf []byte) error {
	payload := pcmBuf
	if s.enc != nil {
		n, err := s.enc.Encode(pcm, packet)
		if err != nil {
			return err
		}
		payload = packet[:n]
	} else {
		for i, v := range pcm {
			binary.LittleEndian.PutUint16(pcmBuf[2*i:], uint16(v))
		}
	}
	if err := s.ws.WriteMessage(websocket.BinaryMessage, payload); err != nil {
		return fmt.Errorf("voiceclient: send audio: %w", err)
	}
	return nil
}

func (s *session) turn(id int) *Turn {
	t, ok := s.turns[id]
	if !ok {
		t = &Turn{Turn: id}
		s.turns[id] = t
	}
	return t
}

// handle reacts to one server message.
func (s *session) handle(m incoming) error {
	if m.audio != nil {
		turn := s.answerTurn
		if s.meter.Received(m.audio, m.at) {
			if err := s.ws.WriteJSON(map[string]any{"type": pipeline.ClientPlaybackStart, "turn": turn}); err != nil {
				return err
			}
		}
		if s.cfg.KeepAudio {
			t := s.turn(turn)
			t.Audio = append(t.Audio, m.audio...)
		}
		return nil
	}
	ev := m.ev
	switch ev.Type {
	case pipeline.EventTranscript:
		if !ev.Final {
			s.partialAt = m.at
			fmt.Fprintf(s.cfg.Log, "\r\033[K… %s", ev.Text)
			return nil
		}
		s.partialAt = time.Time{}
		t := s.turn(ev.Turn)
		if t.Transcript == "" {
			s.order = append(s.order, ev.Turn)
		}
		t.Transcript = ev.Text // a merged utterance repeats the turn
		s.meter.EndOfSpeech(ev.Turn, m.at)
		s.meter.Transcribed(ev.Turn, m.at)
		s.finalAt[ev.Turn] = m.at
		fmt.Fprintf(s.cfg.Log, "\r\033[Kyou: %s\n", ev.Text)
	case pipeline.EventAnswer:
		s.answerTurn = ev.Turn
		s.meter.Answering(ev.Turn)
		t := s.turn(ev.Turn)
		if s.printed == nil {
			s.printed = map[int]bool{}
		}
		if !s.printed[ev.Turn] {
			s.printed[ev.Turn] = true
			fmt.Fprint(s.cfg.Log, "bot: ")
		}
		t.Answer += ev.Text
		fmt.Fprint(s.cfg.Log, ev.Text)
		if ev.Final {
			fmt.Fprintln(s.cfg.Log)
		}
	case pipeline.EventInterrupted:
		played := s.meter.PlayedMs(ev.Turn, time.Now())
		return s.ws.WriteJSON(map[string]any{"type": pipeline.ClientInterrupt, "turn": ev.Turn, "played_ms": played})
	case pipeline.EventTrace:
		t, ok := s.turns[ev.Turn]
		if !ok || t.Transcript == "" || t.Trace != nil {
			return nil
		}
		t.Trace = ev.Marks
		if ms, ok := ev.Marks[pipeline.MarkASRFinal]; ok && !s.finalAt[ev.Turn].IsZero() {
			// The server's speech_end on our clock (loopback or LAN: the
			// one-way delay is small), plus slack for where its VAD and
			// our audibility rule place the last sound.
			speechEnd := s.finalAt[ev.Turn].Add(-time.Duration(ms * float64(time.Millisecond)))
			s.meter.EndOfSpeech(ev.Turn, speechEnd.Add(speechEndSlack))
		}
		t.ServerVoiceToVoiceMs, t.ServerHeardMs = ev.VoiceToVoiceMs, ev.HeardMs
		t.Interrupted = ev.Interrupted
		t.PromptTokens, t.CachedTokens, t.EarlyTokens = ev.PromptTokens, ev.CachedTokens, ev.EarlyTokens
		t.EndOfTurn = ev.EndOfTurn
		s.traced++
	case pipeline.EventError:
		switch ev.Code {
		case pipeline.CodeBackend, pipeline.CodeBusy:
			fmt.Fprintf(s.cfg.Log, "server: %s: %s\n", ev.Code, ev.Message)
		default: // a protocol error is this client's bug or a mismatch: stop
			return fmt.Errorf("voiceclient: server error %s: %s", ev.Code, ev.Message)
		}
	}
	return nil
}

// result collects the finalized turns in order, with the meter's figures.
func (s *session) result() *Result {
	r := &Result{AudioRate: s.cfg.Rate}
	for _, id := range s.order {
		t := *s.turns[id]
		if ms, ok := s.meter.VoiceToVoiceMs(id); ok {
			t.VoiceToVoiceMs = &ms
		}
		if ms, ok := s.meter.HeardMs(id); ok {
			t.HeardMs = &ms
		}
		if ms, ok := s.meter.HeardAfterFinalMs(id); ok {
			t.HeardAfterFinalMs = &ms
		}
		t.AnswerAudioMs = s.meter.AnswerMs(id)
		r.Turns = append(r.Turns, t)
	}
	return r
}

// readAll reads r to its end into buf (grown as needed).
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func dialError(url string, resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("voiceclient: connect %s: %w", url, err)
	}
	defer resp.Body.Close()
	var ev pipeline.Event
	if json.NewDecoder(resp.Body).Decode(&ev) == nil && ev.Message != "" {
		return fmt.Errorf("%w: connect %s: HTTP %d: %s: %s", ErrRefused, url, resp.StatusCode, ev.Code, ev.Message)
	}
	return fmt.Errorf("%w: connect %s: HTTP %d: %w", ErrRefused, url, resp.StatusCode, err)
}
