package web

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
)

// Pieces shared by the WebSocket and WebRTC transports, so both speak the
// protocol of docs/protocol.md the same way.

// controlEvent turns a client control message (playback_start, interrupt,
// stop) into the session's input; nil for any other type.
func controlEvent(msg clientMessage) *pipeline.ClientEvent {
	switch msg.Type {
	case pipeline.ClientPlaybackStart, pipeline.ClientInterrupt, pipeline.ClientStop:
		return &pipeline.ClientEvent{Type: msg.Type, Turn: msg.Turn, PlayedMs: msg.PlayedMs}
	}
	return nil
}

// fillAudioFormat completes an audio event with the transport's wire
// format: the session speaks PCM, the encoding is the transport's business.
func fillAudioFormat(ev *pipeline.Event, encoding string, rate int) {
	if encoding != "" {
		ev.Encoding = encoding
	}
	if ev.SampleRate == 0 {
		ev.SampleRate = rate
	}
	if ev.FrameMs == 0 {
		ev.FrameMs = FrameMs
	}
}

// runSessionSafe runs sess, turning a panic in it into an error so one
// broken session cannot take the server down.
func runSessionSafe(ctx context.Context, sess *pipeline.Session, in <-chan pipeline.Input, out chan<- pipeline.Output, log zerolog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("session panicked")
			err = fmt.Errorf("%w: session panicked: %v", errInternal, p)
		}
	}()
	return sess.Run(ctx, in, out)
}
