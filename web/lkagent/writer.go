package lkagent

import (
	"errors"
	"io"
	"time"

	"github.com/pion/webrtc/v4/pkg/media"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// writer is the job's only reader of out: events go out as data packets
// at once, answer frames to the Opus track through a voice.Paced stream, as
// the WebRTC transport's writer (web/rtc.go) does on a pion track; the
// reasons for holding the pacer's lead back are the same (voice.Paced).
type writer struct {
	j      *job
	stream *voice.Paced
}

func newWriter(j *job) (*writer, error) {
	w := &writer{j: j}
	stream, err := voice.NewPaced(rate, j.w.cfg.OpusBitrate, w)
	if err != nil {
		return nil, err
	}
	w.stream = stream
	return w, nil
}

// loop runs until the session closes out, reading it to the end even when
// writes fail so the session never blocks. Once the job is finishing it
// ends the job at the first moment no turn is in flight and no answer
// audio waits.
func (w *writer) loop() {
	j := w.j
	tick := time.NewTicker(voice.FrameMs * time.Millisecond)
	defer tick.Stop()
	failed := false
	var finishBy time.Time
	for {
		out := j.out
		if w.stream.Full() {
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
			if !failed {
				if err := w.stream.Pump(now); err != nil {
					if !errors.Is(err, io.ErrClosedPipe) {
						j.log.Debug().Err(err).Msg("livekit audio write failed")
					}
					failed = true
					j.cancel()
				}
			}
			if j.finishing.Load() {
				if finishBy.IsZero() {
					finishBy = now.Add(j.w.cfg.TurnWait)
				}
				idle := !j.turnOpen.Load() && w.stream.Idle()
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
			w.stream.Drop() // the cut turn's audio must not be heard
		case pipeline.EventTranscript, pipeline.EventSpeechEnd:
			w.j.turnOpen.Store(true)
		case pipeline.EventTrace:
			w.j.turnOpen.Store(false)
		}
		w.j.sendEvent(ev)
		return true // a lost event is not worth the session
	}
	w.stream.Queue(o.Audio)
	return true
}

// WritePacket writes one 20 ms packet to the track (voice.Track).
func (w *writer) WritePacket(packet []byte) error {
	return w.j.track.WriteSample(media.Sample{Data: packet, Duration: voice.FrameMs * time.Millisecond}, nil)
}

// EncodeFailed counts a dropped answer frame (voice.Track).
func (w *writer) EncodeFailed(error, int) { w.j.obs.FrameDropped("opus_encode") }
