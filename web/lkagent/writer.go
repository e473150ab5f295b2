package lkagent

import (
	"errors"
	"io"
	"time"

	"github.com/pion/webrtc/v4/pkg/media"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// writer is the job's voice.Sink: events go out as data packets at once,
// answer frames to the Opus track through a voice.Paced stream, as the
// WebRTC transport's writer (web/rtc.go) does on a pion track; the reasons
// for holding the pacer's lead back are the same (voice.Paced).
type writer struct {
	j        *job
	stream   *voice.Paced
	finishBy time.Time // once the job is finishing: when a turn in flight is cut
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

// loop runs until the session closes out (voice.Paced.Serve).
func (w *writer) loop() { w.stream.Serve(w.j.out, w) }

// Event publishes one event (voice.Sink) and follows whether a turn is in
// flight.
func (w *writer) Event(ev pipeline.Event) bool {
	switch ev.Type {
	case pipeline.EventAudio:
		ev.Encoding, ev.SampleRate, ev.FrameMs = voice.EncodingOpus, rate, voice.FrameMs
	case pipeline.EventTranscript, pipeline.EventSpeechEnd:
		w.j.turnOpen.Store(true)
	case pipeline.EventTrace:
		w.j.turnOpen.Store(false)
	}
	w.j.sendEvent(ev)
	return true // a lost event is not worth the session
}

// Stop ends the job after a failed write (voice.Sink).
func (w *writer) Stop() { w.j.cancel() }

// Tick ends a finishing job at the first moment no turn is in flight and no
// answer audio waits, or once TurnWait has passed (voice.Sink).
func (w *writer) Tick(now time.Time) {
	j := w.j
	if !j.finishing.Load() {
		return
	}
	if w.finishBy.IsZero() {
		w.finishBy = now.Add(j.w.cfg.TurnWait)
	}
	idle := !j.turnOpen.Load() && w.stream.Idle()
	if idle || now.After(w.finishBy) {
		j.log.Info().Bool("turn_cut", !idle).Msg("livekit job ending between turns (drain)")
		j.cancel()
	}
}

// WritePacket writes one 20 ms packet to the track (voice.Track).
func (w *writer) WritePacket(packet []byte) error {
	err := w.j.track.WriteSample(media.Sample{Data: packet, Duration: voice.FrameMs * time.Millisecond}, nil)
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		w.j.log.Debug().Err(err).Msg("livekit audio write failed")
	}
	return err
}

// EncodeFailed counts a dropped answer frame (voice.Track).
func (w *writer) EncodeFailed(error, int) { w.j.obs.FrameDropped("opus_encode") }
