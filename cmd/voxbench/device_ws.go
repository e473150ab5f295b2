package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// speechEndSlack: the last audible sample may lie a little after the
// server's speech_end (a soft word end its VAD counts as silence); the
// same allowance voiceclient makes.
const speechEndSlack = 150 * time.Millisecond

// wsDevice speaks over the WebSocket protocol of docs/protocol.md. Its
// conversation loop waits for each answer before the next question (or cuts
// it, with --barge-in), which voiceclient.Run's whole-file streaming does
// not do; the latencies come from voiceclient.Meter, the same measurement
// voxclient reports: heard is when the answer's first audible sample plays
// minus the last audible sample of the question sent.
type wsDevice struct {
	url, encoding string
	rate          int
}

func newDevice(o options) (device, error) {
	switch o.transport {
	case "ws":
		rate := 16000
		if o.encoding == "opus" {
			rate = 48000
		}
		return &wsDevice{url: o.url, encoding: o.encoding, rate: rate}, nil
	case "rtc":
		return newRTCDevice(o.url)
	case "xiaozhi":
		return newXiaozhiDevice(o.url, o.bargeIn > 0)
	}
	return nil, fmt.Errorf("%w: --transport %s is not built yet (use ws)", errCommandLine, o.transport)
}

// wsDialer is websocket.DefaultDialer over rawConn.
var wsDialer = websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 45 * time.Second, NetDialContext: dialRaw}

// wsMsg is one message from the server, stamped on arrival.
type wsMsg struct {
	ev    *pipeline.Event
	audio []int16
	at    time.Time
}

// inbox carries what a device receives, in arrival order, to converse.
// Answer audio (a frame every 20 ms while an answer plays) waits in it for
// converse's next microphone tick, at most a frame period: each frame keeps
// its arrival time, which is what the heard latency is measured from, so
// only when converse looks at it moves. Events, and the first frame after
// an event (an answer's first audio: playback_start goes out then), wake
// converse at once. Waking a goroutine for every answer frame doubled
// voxbench's wake-ups, and wake-ups are most of its CPU.
type inbox struct {
	msgs       chan wsMsg
	wake       chan struct{} // one pending wake-up at most
	afterEvent atomic.Bool   // the latest message put was an event
}

func newInbox() *inbox {
	return &inbox{msgs: make(chan wsMsg, 256), wake: make(chan struct{}, 1)}
}

// put queues m, waiting while the inbox is full unless done closes (a nil
// done: no end), and wakes converse for an event or the first audio after
// one.
func (in *inbox) put(m wsMsg, done <-chan struct{}) {
	select {
	case in.msgs <- m:
	case <-done:
		return
	}
	if m.audio == nil || in.afterEvent.Load() {
		in.poke()
	}
	in.afterEvent.Store(m.audio == nil)
}

func (in *inbox) poke() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// close ends the messages (the sender's call) and wakes converse to see it.
func (in *inbox) close() {
	close(in.msgs)
	in.poke()
}

// asked is one question in flight.
type asked struct {
	res      turnResult
	finalAt  time.Time // arrival of its final transcript
	answered bool      // audible answer audio arrived
}

func (d *wsDevice) session(ctx context.Context, p sessionPlan, report func(turnResult)) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, resp, err := wsDialer.DialContext(dctx, d.url, nil)
	if err != nil {
		return dialRefusal(resp, err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	start := map[string]any{"type": "start", "sample_rate": d.rate, "encoding": d.encoding,
		"output_sample_rate": d.rate, "client": map[string]string{"name": "voxbench", "version": "1"}}
	if p.device != "" {
		start["device"] = p.device
	}
	if err := ws.WriteJSON(start); err != nil {
		return fmt.Errorf("send start: %w", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ready pipeline.Event
	if err := ws.ReadJSON(&ready); err != nil {
		return fmt.Errorf("waiting for ready: %w", err)
	}
	if ready.Type != pipeline.EventReady {
		return &refusedError{status: http.StatusSwitchingProtocols, code: ready.Code, msg: ready.Message}
	}
	_ = ws.SetReadDeadline(time.Time{})

	var enc *audio.OpusEncoder
	var dec *audio.OpusDecoder
	if d.encoding == "opus" {
		if enc, err = audio.NewOpusEncoder(d.rate, 32000); err != nil {
			return err
		}
		if dec, err = audio.NewOpusDecoder(d.rate); err != nil {
			return err
		}
	}
	in := newInbox()
	readErr := make(chan error, 1)
	go func() { readErr <- wsRead(ws, dec, in) }()
	err = converse(ctx, &wsLink{ws: ws, enc: enc}, d.rate, d.rate, p, in, report)
	return hangUp(ctx, ws, map[string]string{"type": "stop"}, in, readErr, err)
}

// hangUp ends a WebSocket session whose conversation ended with err: it
// sends bye, gives the server 2 s to close, drains the inbox until the
// reader ends, and returns err, or the reader's error if the session
// itself had none.
func hangUp(ctx context.Context, ws *websocket.Conn, bye any, in *inbox, readErr <-chan error, err error) error {
	_ = ws.WriteJSON(bye)
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	for range in.msgs {
	}
	if rerr := <-readErr; err == nil && rerr != nil && ctx.Err() == nil {
		err = rerr
	}
	return err
}

// link is a device's way to the server: microphone frames and control
// messages. Only converse's goroutine calls it.
type link interface {
	sendAudio(pcm []int16) error
	sendJSON(v any) error
}

// wsLink sends over the WebSocket, as PCM16 or Opus.
type wsLink struct {
	ws       *websocket.Conn
	enc      *audio.OpusEncoder // nil: PCM16
	packet   []byte
	pcmBytes []byte
}

func (l *wsLink) sendAudio(pcm []int16) error {
	var payload []byte
	if l.enc != nil {
		if l.packet == nil {
			l.packet = make([]byte, audio.MaxOpusPacket)
		}
		n, err := l.enc.Encode(pcm, l.packet)
		if err != nil {
			return err
		}
		payload = l.packet[:n]
	} else {
		if len(l.pcmBytes) != 2*len(pcm) {
			l.pcmBytes = make([]byte, 2*len(pcm))
		}
		for i, s := range pcm {
			binary.LittleEndian.PutUint16(l.pcmBytes[2*i:], uint16(s))
		}
		payload = l.pcmBytes
	}
	return l.ws.WriteMessage(websocket.BinaryMessage, payload)
}

func (l *wsLink) sendJSON(v any) error { return l.ws.WriteJSON(v) }

// converse is the device's microphone, at rate Hz, and player, at
// playRate Hz; its goroutine is the only one that sends on l. It sends a
// frame on every tick of the plan's clock and handles what arrived
// (in.msgs, in order) when the inbox wakes it or before that frame.
func converse(ctx context.Context, l link, rate, playRate int, p sessionPlan, in *inbox, report func(turnResult)) error {
	frame := rate / 50
	silence := make([]int16, frame)
	meter := voiceclient.NewMeter(rate, playRate)
	ticks, stop := p.clock.subscribe(p.phase)
	defer stop()

	var (
		next        int     // index of the next question
		speech      []int16 // the question being spoken
		pos         int     // samples of it sent
		cur         *asked  // the question being spoken or awaiting its turn number
		byTurn      = map[int]*asked{}
		answerTurn  int          // turn of the latest answer text: answer audio belongs to it
		nextAt      = time.Now() // when to start the next question
		outstanding int          // questions asked whose turn has not ended
		lastTurn    int          // highest server turn seen
		progress    = time.Now() // last time anything arrived
	)
	finish := func(a *asked, code string) {
		if code != "" && a.res.Code == "" {
			a.res.Code = code
		}
		report(a.res)
		outstanding--
		if a.res.Turn != 0 {
			delete(byTurn, a.res.Turn)
		}
		if a == cur {
			cur = nil
		}
	}
	handle := func(m wsMsg) error {
		progress = m.at
		if m.audio != nil {
			a := byTurn[answerTurn]
			if a == nil {
				return nil
			}
			if meter.Received(m.audio, m.at) {
				if err := l.sendJSON(map[string]any{"type": "playback_start", "turn": answerTurn}); err != nil {
					return err
				}
			}
			if _, ok := meter.HeardMs(answerTurn); ok && !a.answered {
				a.answered = true
				if p.bargeIn > 0 {
					nextAt = m.at.Add(p.bargeIn) // the next question cuts this answer
				}
			}
			return nil
		}
		ev := m.ev
		switch ev.Type {
		case pipeline.EventTranscript:
			if ev.Turn > lastTurn && cur != nil && cur.res.Turn == 0 {
				cur.res.Turn = ev.Turn
				byTurn[ev.Turn] = cur
			}
			lastTurn = max(lastTurn, ev.Turn)
			if a := byTurn[ev.Turn]; a != nil && ev.Final {
				a.res.Transcript, a.finalAt = ev.Text, m.at
				meter.EndOfSpeech(ev.Turn, m.at)
				if a == cur && speech == nil {
					cur = nil // its turn is known; the next question may follow the answer
				}
			}
		case pipeline.EventAnswer:
			answerTurn = ev.Turn
			meter.Answering(ev.Turn)
			if a := byTurn[ev.Turn]; a != nil {
				a.res.Answer += ev.Text
			}
		case pipeline.EventInterrupted:
			played := meter.PlayedMs(ev.Turn, time.Now())
			if err := l.sendJSON(map[string]any{"type": "interrupt", "turn": ev.Turn, "played_ms": played}); err != nil {
				return err
			}
		case pipeline.EventTrace:
			a := byTurn[ev.Turn]
			if a == nil {
				return nil
			}
			a.res.Marks, a.res.V2VMs = ev.Marks, ev.VoiceToVoiceMs
			a.res.PromptTokens, a.res.CachedTokens, a.res.EarlyTokens, a.res.TTFTMs = ev.PromptTokens, ev.CachedTokens, ev.EarlyTokens, ev.TTFTMs
			a.res.Cache, a.res.EndSilenceMs = ev.Cache, ev.EndSilenceMs
			if final, ok := ev.Marks[pipeline.MarkASRFinal]; ok && !a.finalAt.IsZero() {
				// The server's speech_end on this clock: the final's
				// arrival less its asr_final mark (voiceclient.Meter).
				meter.EndOfSpeech(ev.Turn, a.finalAt.Add(-time.Duration(final*float64(time.Millisecond))).Add(speechEndSlack))
			}
			if ms, ok := meter.HeardMs(ev.Turn); ok {
				a.res.HeardMs = &ms
			}
			a.res.Interrupted = ev.Interrupted
			finish(a, "")
			if p.bargeIn == 0 {
				nextAt = m.at.Add(p.pause)
			}
		case pipeline.EventError:
			a := byTurn[ev.Turn]
			if a == nil {
				a = cur
			}
			switch {
			case a != nil:
				a.res.Code = ev.Code
				if a.res.Turn == 0 || ev.Code == pipeline.CodeBusy {
					finish(a, ev.Code)
					nextAt = m.at.Add(p.pause)
				}
			case ev.Code != pipeline.CodeBusy && ev.Code != pipeline.CodeBackend:
				return fmt.Errorf("server error %s: %s", ev.Code, ev.Message)
			}
		}
		return nil
	}
	finished := func() bool { return !p.more(next, time.Now()) && outstanding == 0 && speech == nil }
	// drain handles every message waiting in the inbox, until the session
	// is over.
	drain := func() error {
		for !finished() {
			select {
			case m, ok := <-in.msgs:
				if !ok {
					return errors.New("server closed the connection")
				}
				if err := handle(m); err != nil {
					return err
				}
			default:
				return nil
			}
		}
		return nil
	}
	for {
		if finished() {
			return nil
		}
		var now time.Time
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-in.wake:
			if err := drain(); err != nil {
				return err
			}
			continue
		case now = <-ticks:
		}
		if err := drain(); err != nil {
			return err
		}
		if speech == nil && cur == nil && p.more(next, now) && !now.Before(nextAt) && (outstanding == 0 || p.bargeIn > 0 && allAnswered(byTurn)) {
			q := p.question(next)
			next++
			speech, pos = resampled(q, rate), 0
			cur = &asked{res: turnResult{Ref: q.ref}}
			outstanding++
		}
		pcm := silence
		if speech != nil {
			n := min(frame, len(speech)-pos)
			if n == frame {
				pcm = speech[pos : pos+frame]
			} else {
				buf := make([]int16, frame)
				copy(buf, speech[pos:])
				pcm = buf
			}
			pos += frame
			if pos >= len(speech) {
				speech = nil
			}
		}
		if err := l.sendAudio(pcm); err != nil {
			return fmt.Errorf("send audio: %w", err)
		}
		meter.Sent(pcm, time.Now())
		if outstanding > 0 && speech == nil && now.Sub(progress) > p.turnTimeout {
			for _, a := range byTurn {
				finish(a, "timeout")
			}
			if cur != nil {
				finish(cur, "timeout")
			}
			outstanding = 0
			nextAt = now.Add(p.pause)
		}
	}
}

// allAnswered says whether every turn in flight has audible answer audio
// (with --barge-in the next question may then start over it).
func allAnswered(byTurn map[int]*asked) bool {
	for _, a := range byTurn {
		if !a.answered {
			return false
		}
	}
	return true
}

// resampled returns q's audio at rate.
func resampled(q question, rate int) []int16 {
	if q.rate == rate {
		return q.pcm
	}
	r, err := audio.NewResampler(q.rate, rate)
	if err != nil {
		return q.pcm
	}
	pcm := append(append([]int16(nil), q.pcm...), make([]int16, q.rate/100)...)
	return append([]int16(nil), r.Process(nil, pcm)...)
}

// wsRead is the connection's only reader; it closes in when it ends.
func wsRead(ws *websocket.Conn, dec *audio.OpusDecoder, in *inbox) error {
	defer in.close()
	pcm := make([]int16, 5760)
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
			in.put(wsMsg{audio: samples, at: now}, nil)
			continue
		}
		var ev pipeline.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad event %q: %w", data, err)
		}
		in.put(wsMsg{ev: &ev, at: now}, nil)
	}
}

// dialRefusal turns a failed upgrade into a refusedError when the server
// answered (503 busy and its JSON body), else a connection error.
func dialRefusal(resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer resp.Body.Close()
	var ev pipeline.Event
	_ = json.NewDecoder(resp.Body).Decode(&ev)
	if ev.Code == "" {
		ev.Code = fmt.Sprintf("http_%d", resp.StatusCode)
	}
	return &refusedError{status: resp.StatusCode, code: ev.Code, msg: ev.Message}
}
