package xiaozhi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

const packetDur = frameDurationMs * time.Millisecond

// announcedTimeout takes back a tts start sent at the end of an utterance
// (pipeline.EventSpeechEnd) whose final transcript has not come this long
// after: the recogniser found no words after all, and the session starts no
// turn. The device would otherwise stay speaking, its microphone off.
const announcedTimeout = 3 * time.Second

// writer is the writer goroutine's state: it turns the session's output
// into the messages the firmware acts on (reference §9.1):
//
//	tts start → stt → llm (emotion) → [sentence_start → Opus packets]… → tts stop
//
// tts start goes out when the session ends the person's utterance
// (pipeline.EventSpeechEnd, sent when words were heard), so that
// TTSStartLead, the time the device needs to switch to speaking, runs while
// the recogniser finishes; stt and llm follow with the final transcript (the
// firmware shows them whenever they come). Without that event (no partial
// words yet), all three go out at the final. Audio is the session's paced
// 20 ms frames gathered into 60 ms Opus packets; tts stop follows once the
// audio sent has played (the device plays at real time from the first
// packet). An abort, or a barge-in the session detected, sends tts stop at
// once and tells the session how much was played, so the history keeps
// only what the person heard.
type writer struct {
	c    *conn
	down *voice.Downlink
	buf  []byte // header + packet

	turn       int // the pipeline turn being spoken; 0 none
	ttsOn      bool
	ttsStartAt time.Time
	firstAt    time.Time // first packet of the turn
	sentMs     int       // audio of the turn written
	dropAudio  bool      // the turn was stopped: its late frames are dropped
	sentUntil  time.Time // when the audio sent so far will have played
	answer     strings.Builder
	answerDone bool // the answer's final event came: its last sentence is complete
	shown      int  // bytes of answer already sent as sentence_start
	stopTimer  *time.Timer
	stopDue    bool
	// announced: tts start went out at the end of the utterance and its
	// final transcript has not come yet; announceTimer takes it back.
	announced     bool
	announceTimer *time.Timer
}

func (c *conn) writeLoop() {
	defer c.cancel()
	w := &writer{c: c, stopTimer: time.NewTimer(time.Hour), announceTimer: time.NewTimer(time.Hour)}
	w.stopTimer.Stop()
	w.announceTimer.Stop()
	defer w.announceTimer.Stop()
	ping := time.NewTicker(c.h.host.IdleTimeout * 9 / 10)
	defer ping.Stop()
	idle := time.NewTicker(min(c.h.cfg.IdleTimeout/4, 5*time.Second))
	defer idle.Stop()

	ctrl, out := c.ctrl, c.out
	for ctrl != nil || out != nil {
		if ctrl != nil { // ctrl first: the hello reply precedes the session's output
			select {
			case m, ok := <-ctrl:
				if !ok {
					ctrl = nil
				} else if !w.control(m) {
					return
				}
				continue
			default:
			}
		}
		select {
		case m, ok := <-ctrl:
			if !ok {
				ctrl = nil
				continue
			}
			if !w.control(m) {
				return
			}
		case o, ok := <-out:
			if !ok {
				w.sessionEnded()
				return
			}
			if !w.output(o) {
				return
			}
		case p := <-c.mcp:
			if w.json(mcpMessage{Type: typeMCP, SessionID: c.id, Payload: p}) != nil {
				return
			}
		case <-w.stopTimer.C:
			if w.stopDue && !w.ttsStop() {
				return
			}
		case <-w.announceTimer.C:
			if w.announced {
				w.announced = false
				w.c.log.Debug().Dur("after", announcedTimeout).Msg("no final transcript after speech_end: tts start taken back")
				if !w.ttsStop() {
					return
				}
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.h.host.WriteTimeout)); err != nil {
				return
			}
		case now := <-idle.C:
			if last := time.Unix(0, c.lastActive.Load()); now.Sub(last) > c.h.cfg.IdleTimeout && !w.ttsOn {
				c.log.Info().Dur("idle", now.Sub(last)).Msg("xiaozhi device idle, closing")
				w.close(websocket.CloseNormalClosure, "idle")
				return
			}
		case <-c.ctx.Done():
			w.close(websocket.CloseGoingAway, "server shutting down")
			return
		}
	}
	w.close(websocket.CloseNormalClosure, "")
}

// control handles a message from the reader; false ends the writer.
func (w *writer) control(m ctrlMsg) bool {
	switch m.kind {
	case ctrlStart:
		down, err := voice.NewOpusDownlink(w.c.h.cfg.OutputRate, w.c.h.host.OpusBitrate, frameDurationMs)
		if err != nil {
			w.c.log.Error().Err(err).Msg("xiaozhi opus encoder")
			w.close(websocket.CloseInternalServerErr, "opus encoder")
			return false
		}
		w.down = down
		w.buf = make([]byte, v2HeaderLen+audio.MaxOpusPacket)
		return w.json(m.msg) == nil
	case ctrlAbort:
		return w.stopTurn(true)
	case ctrlClose:
		if m.msg != nil {
			_ = w.json(m.msg)
		}
		w.close(m.code, "")
		return false
	}
	return w.json(m.msg) == nil
}

// output handles one session output; false ends the writer.
func (w *writer) output(o pipeline.Output) bool {
	if o.Event == nil {
		return w.audio(o.Audio)
	}
	ev := o.Event
	sid := w.c.id
	switch ev.Type {
	case pipeline.EventSpeechEnd:
		if w.ttsOn { // an answer is still playing (realtime mode)
			return true
		}
		w.announced = true
		w.announceTimer.Reset(announcedTimeout)
		return w.ttsStart()
	case pipeline.EventTranscript:
		if !ev.Final {
			return true
		}
		if w.announced {
			w.announced = false
			w.announceTimer.Stop()
		}
		if w.stopDue && !w.ttsStop() { // the last turn's stop is still waiting
			return false
		}
		w.newTurn(ev.Turn)
		w.c.touch()
		if w.json(sttMessage{Type: typeSTT, Text: ev.Text, SessionID: sid}) != nil {
			return false
		}
		if e := w.c.h.cfg.Emotion; e != "" {
			if w.json(llmMessage{Type: typeLLM, Emotion: e, Text: emotionEmoji[e], SessionID: sid}) != nil {
				return false
			}
		}
		return w.ttsStart()
	case pipeline.EventAnswer:
		if ev.Turn != w.turn || w.dropAudio {
			return true
		}
		w.answer.WriteString(ev.Text)
		w.answerDone = w.answerDone || ev.Final
		if w.firstAt.IsZero() {
			return true // subtitles follow the audio: shown from the first packet on
		}
		return w.sentences(w.answerDone)
	case pipeline.EventInterrupted:
		// The session heard the person over the answer (realtime mode).
		if ev.Turn == w.turn {
			return w.stopTurn(false)
		}
		return true
	case pipeline.EventTrace:
		if ev.Turn != w.turn || w.dropAudio || !w.ttsOn {
			return true
		}
		// The answer's audio is all sent: finish the last packet, then stop
		// once it has played.
		if w.down.Pending() {
			pkt, err := w.down.Flush()
			if err == nil && !w.packet(pkt) {
				return false
			}
		}
		if !w.sentences(true) {
			return false
		}
		w.stopDue = true
		w.stopTimer.Reset(max(0, time.Until(w.sentUntil)))
		return true
	case pipeline.EventError:
		return w.json(errorMessage{Type: typeError, Code: ev.Code, Message: ev.Message, SessionID: sid}) == nil
	}
	return true // audio format, partial transcripts: not the device's business
}

func (w *writer) newTurn(id int) {
	w.turn, w.dropAudio = id, false
	w.firstAt, w.sentMs = time.Time{}, 0
	w.answer.Reset()
	w.answerDone, w.shown = false, 0
	w.down.Reset()
}

func (w *writer) ttsStart() bool {
	if w.ttsOn {
		return true
	}
	w.ttsOn, w.ttsStartAt = true, time.Now()
	return w.json(ttsMessage{Type: typeTTS, State: ttsStart, SessionID: w.c.id}) == nil
}

func (w *writer) ttsStop() bool {
	w.stopDue, w.announced = false, false
	w.stopTimer.Stop()
	w.ttsOn = false
	w.c.touch() // the device listens again (or idles) from here
	return w.json(ttsMessage{Type: typeTTS, State: ttsStop, SessionID: w.c.id}) == nil
}

// stopTurn ends the answer now: tts stop (always, even with nothing
// playing: the firmware waits for it after an abort), the session is told
// what was played (the device played from the first packet, at real time),
// and the turn's remaining frames are dropped.
func (w *writer) stopTurn(byDevice bool) bool {
	if w.turn != 0 && !w.dropAudio {
		played := 0.0
		if !w.firstAt.IsZero() {
			played = min(float64(w.sentMs), float64(time.Since(w.firstAt).Milliseconds()))
		}
		w.dropAudio = true
		w.down.Reset()
		w.sentUntil = time.Time{}
		ev := &pipeline.ClientEvent{Type: pipeline.ClientInterrupt, Turn: w.turn, PlayedMs: played}
		select { // never dropped; the session reads in promptly
		case w.c.in <- pipeline.Input{Event: ev}:
		case <-w.c.ctx.Done():
			return false
		}
		w.c.log.Debug().Int("turn", w.turn).Float64("played_ms", played).Bool("by_device", byDevice).Msg("answer stopped")
	}
	return w.ttsStop()
}

// audio handles one 20 ms answer frame.
func (w *writer) audio(pcm []int16) bool {
	if w.dropAudio || w.down == nil {
		return true
	}
	if !w.ttsOn && !w.ttsStart() { // an answer without a transcript
		return false
	}
	pkt, err := w.down.Write(pcm)
	if err != nil {
		w.c.h.host.Dropped("opus_encode")
		w.c.log.Debug().Err(err).Msg("opus encode")
		return true
	}
	if pkt == nil {
		return true
	}
	if w.firstAt.IsZero() {
		// The firmware drops audio until it has switched to speaking.
		if wait := w.c.h.cfg.TTSStartLead - time.Since(w.ttsStartAt); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-w.c.ctx.Done():
				t.Stop()
				return false
			}
		}
	}
	return w.packet(pkt)
}

// packet writes one Opus packet with the session's framing.
func (w *writer) packet(pkt []byte) bool {
	first := w.firstAt.IsZero()
	if first && !w.sentences(w.answerDone) { // the subtitle right before its audio
		return false
	}
	now := time.Now()
	if first {
		w.firstAt = now
	}
	hl := headerLen(w.c.version)
	putHeader(w.c.version, w.buf, len(pkt), uint32(now.UnixMilli()))
	n := copy(w.buf[hl:], pkt)
	c := w.c
	_ = c.ws.SetWriteDeadline(now.Add(c.h.host.WriteTimeout))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, w.buf[:hl+n]); err != nil {
		c.log.Debug().Err(err).Msg("xiaozhi write failed")
		return false
	}
	if w.sentUntil.Before(now) {
		w.sentUntil = now
	}
	w.sentUntil = w.sentUntil.Add(packetDur)
	w.sentMs += frameDurationMs
	if first {
		// The device starts playing on arrival: that is the turn's
		// playback_start (the device reports nothing itself).
		ev := &pipeline.ClientEvent{Type: pipeline.ClientPlaybackStart, Turn: w.turn}
		select {
		case c.in <- pipeline.Input{Event: ev}:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// sentences sends sentence_start for every complete sentence of the answer
// not yet shown (all of the rest when final).
func (w *writer) sentences(final bool) bool {
	text := w.answer.String()[w.shown:]
	for text != "" {
		end := sentenceEnd(text)
		if end < 0 {
			if !final {
				return true
			}
			end = len(text)
		}
		s := strings.TrimSpace(text[:end])
		w.shown += end
		text = text[end:]
		if s == "" {
			continue
		}
		if w.json(ttsMessage{Type: typeTTS, State: ttsSentenceStart, Text: s, SessionID: w.c.id}) != nil {
			return false
		}
	}
	return true
}

// sentenceEnd returns the length of text's first complete sentence (through
// its terminal punctuation and a following space), or -1.
func sentenceEnd(text string) int {
	for i, r := range text {
		switch r {
		case '。', '！', '？', '；':
			return i + len(string(r))
		case '.', '!', '?', ';':
			if j := i + 1; j < len(text) && (text[j] == ' ' || text[j] == '\n') {
				return j + 1
			}
		}
	}
	return -1
}

func (w *writer) json(m any) error {
	c := w.c
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.h.host.WriteTimeout))
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.log.Debug().Err(err).Msg("xiaozhi write failed")
		return err
	}
	return nil
}

func (w *writer) sessionEnded() {
	var err error
	select {
	case err = <-w.c.runErr:
	default:
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		w.c.log.Warn().Err(err).Msg("xiaozhi session failed")
		_ = w.json(errorMessage{Type: typeError, Code: pipeline.CodeInternal, Message: err.Error(), SessionID: w.c.id})
		w.close(websocket.CloseInternalServerErr, "session failed")
		return
	}
	w.close(websocket.CloseNormalClosure, "")
}

func (w *writer) close(code int, text string) {
	c := w.c
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(c.h.host.WriteTimeout))
}
