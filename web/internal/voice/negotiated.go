package voice

import (
	"context"
	"sync"

	"github.com/voxpipe/voxpipe/pipeline"
)

// NegotiatedRules are the Rules of a transport that negotiates the audio
// format before the session starts (the WebRTC offer, the LiveKit room):
// a client's first start only counts as the one start a session may have,
// and a second is bad_message, as on the WebSocket. Unlike Rules they are
// safe for concurrent use, as pion and the LiveKit SDK may run data
// callbacks concurrently.
type NegotiatedRules struct {
	mu    sync.Mutex
	rules Rules
}

// Running records that the session runs: control events are passed on.
func (r *NegotiatedRules) Running() {
	r.mu.Lock()
	r.rules.Running()
	r.mu.Unlock()
}

// Parse reads one control message. It returns a client event for the
// session, a problem to report, or neither (the start, which the
// negotiation already answered).
func (r *NegotiatedRules) Parse(data []byte) (*pipeline.ClientEvent, *Problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ev, start, p := r.rules.Parse(data)
	if start {
		r.rules.AcceptStart()
	}
	return ev, p
}

// Forward passes a client event to the session. Control messages are never
// dropped: it waits until the session takes it or ctx ends.
func Forward(ctx context.Context, in chan<- pipeline.Input, ev *pipeline.ClientEvent) {
	select {
	case in <- pipeline.Input{Event: ev}:
	case <-ctx.Done():
	}
}
