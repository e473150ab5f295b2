package lkagent

import (
	"errors"
	"io"
	"time"

	"github.com/pion/webrtc/v4/pkg/media"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

const (
	frameDur = voice.FrameMs * time.Millisecond
	// queueFrames bounds the answer frames the writer holds ahead of the
	// stream's pace (the pacer hands them over up to output_lead_ms early).
	queueFrames = 32
	// maxStall is how far the stream may fall behind wall time before the
	// writer starts over instead of catching up with silence.
	maxStall = 200 * time.Millisecond
)

// writer is the job's only reader of out: events go out as data packets
// at once, answer frames to the Opus track at the stream's pace, with
// silence between answers so the receiver's jitter buffer follows wall
// time. It is the WebRTC transport's writer (web/rtc.go) on a LiveKit
// track; the reasons for holding the pacer's lead here are the same: RTP
// packets ahead of their time make the following ones look late.
type writer struct {
	j         *job
	down      *voice.Downlink
	silence   []byte
	sentUntil time.Time
	queue     [][]int16 // answer frames from head on (owned once received)
	head      int
}

func newWriter(j *job) (*writer, error) {
	down, err := voice.NewOpusDownlink(rate, j.w.cfg.OpusBitrate, voice.FrameMs)
	if err != nil {
		return nil, err
	}
	enc, err := audio.NewOpusEncoder(rate, j.w.cfg.OpusBitrate)
	if err != nil {
		return nil, err
	}
	packet := make([]byte, audio.MaxOpusPacket)
	n, err := enc.Encode(make([]int16, rate/1000*voice.FrameMs), packet)
	if err != nil {
		return nil, err
	}
	return &writer{j: j, down: down, silence: append([]byte(nil), packet[:n]...), queue: make([][]int16, 0, queueFrames)}, nil
}

// loop runs until the session closes out, reading it to the end even when
// writes fail so the session never blocks. Once the job is finishing it
// ends the job at the first moment no turn is in flight and no answer
// audio waits.
func (w *writer) loop() {
	j := w.j
	tick := time.NewTicker(frameDur)
	defer tick.Stop()
	failed := false
	var finishBy time.Time
	for {
		out := j.out
		if len(w.queue) == cap(w.queue) && w.head == 0 {
			out = nil // full: the pacer waits
		}
		select {
		case o, ok := <-out:
			if !ok {
				return
			}
			if !failed && !w.output(o) {
				failed = true
				j.cancel()
			}
		case now := <-tick.C:
			for !failed && w.sentUntil.Before(now.Add(frameDur/2)) {
				if !w.writeNext(now) {
					failed = true
					j.cancel()
				}
			}
			if j.finishing.Load() {
				if finishBy.IsZero() {
					finishBy = now.Add(j.w.cfg.TurnWait)
				}
				idle := !j.turnOpen.Load() && w.head == len(w.queue)
				if idle || now.After(finishBy) {
					j.log.Info().Bool("turn_cut", !idle).Msg("livekit job ending between turns (drain)")
					j.cancel()
				}
			}
		}
	}
}

// output publishes an event, or queues an answer frame.
func (w *writer) output(o pipeline.Output) bool {
	if o.Event != nil {
		ev := *o.Event
		switch ev.Type {
		case pipeline.EventAudio:
			ev.Encoding, ev.SampleRate, ev.FrameMs = voice.EncodingOpus, rate, voice.FrameMs
		case pipeline.EventInterrupted:
			clear(w.queue) // the cut turn's audio must not be heard
			w.queue, w.head = w.queue[:0], 0
		case pipeline.EventTranscript, pipeline.EventSpeechEnd:
			w.j.turnOpen.Store(true)
		case pipeline.EventTrace:
			w.j.turnOpen.Store(false)
		}
		w.j.sendEvent(ev)
		return true // a lost event is not worth the session
	}
	if w.head > 0 && len(w.queue) == cap(w.queue) {
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	w.queue = append(w.queue, o.Audio)
	return true
}

// writeNext writes the next answer frame, or silence when none waits.
func (w *writer) writeNext(now time.Time) bool {
	if w.head == len(w.queue) {
		return w.write(w.silence, now)
	}
	pcm := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	if w.head == len(w.queue) {
		w.queue, w.head = w.queue[:0], 0
	}
	packet, err := w.down.Write(pcm)
	if err != nil {
		w.j.obs.FrameDropped("opus_encode")
	}
	if packet == nil {
		packet = w.silence // the stream keeps its pace
	}
	return w.write(packet, now)
}

// write sends one 20 ms packet and advances the stream's wall clock.
func (w *writer) write(packet []byte, now time.Time) bool {
	if err := w.j.track.WriteSample(media.Sample{Data: packet, Duration: frameDur}, nil); err != nil {
		if !errors.Is(err, io.ErrClosedPipe) {
			w.j.log.Debug().Err(err).Msg("livekit audio write failed")
		}
		return false
	}
	if w.sentUntil.Before(now.Add(-maxStall)) {
		w.sentUntil = now
	}
	w.sentUntil = w.sentUntil.Add(frameDur)
	return true
}
