package voice

import (
	"context"
	"fmt"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Uplink turns a client's audio messages into session input. Decoded audio
// goes into a ring of reused buffers: the session's input queue holds at
// most cap(in) messages and the session works on one, so a ring of
// cap(in)+2 slots never hands out a slot the session still reads, as long
// as the Uplink is the only sender of audio on in. A slot grows to the
// longest message it has carried and is then reused: no allocation per
// frame in steady state. One goroutine owns an Uplink.
type Uplink struct {
	in      chan<- pipeline.Input
	dec     *audio.OpusDecoder // nil for PCM16
	scratch []int16            // one decoded Opus packet
	ring    [][]int16
	next    int
}

// MaxOpusFrameSamples is 120 ms at 48 kHz, the longest Opus packet.
const MaxOpusFrameSamples = 5760

// NewUplink returns an Uplink that decodes encoding (EncodingOpus or
// EncodingPCM16) at rate and queues the audio on in.
func NewUplink(in chan<- pipeline.Input, encoding string, rate int) (*Uplink, error) {
	u := &Uplink{in: in, ring: make([][]int16, cap(in)+2)}
	switch encoding {
	case EncodingOpus:
		dec, err := audio.NewOpusDecoder(rate)
		if err != nil {
			return nil, err
		}
		u.dec = dec
		u.scratch = make([]int16, rate*120/1000)
	case EncodingPCM16:
	default:
		return nil, fmt.Errorf("%w: uplink encoding %q", audio.ErrSampleRate, encoding)
	}
	return u, nil
}

// Write decodes one audio message and queues it without blocking. It
// returns false when the session's queue is full (the frame is dropped:
// the caller counts it), or a bad_audio problem for a message it cannot
// decode. An empty Opus message is a lost packet (concealed).
func (u *Uplink) Write(data []byte) (queued bool, p *Problem) {
	var slot []int16
	if u.dec != nil {
		n, err := u.dec.Decode(data, u.scratch)
		if err != nil {
			return false, problem(pipeline.CodeBadAudio, "undecodable opus packet: %v", err)
		}
		slot = u.slot(n)
		copy(slot, u.scratch[:n])
	} else {
		if len(data) == 0 || len(data)%2 != 0 {
			return false, problem(pipeline.CodeBadAudio, "pcm16 frame of %d bytes (want an even, non-zero length)", len(data))
		}
		slot = u.slot(len(data) / 2)
		DecodePCM16(slot, data)
	}
	select {
	case u.in <- pipeline.Input{Audio: slot}:
		u.next = (u.next + 1) % len(u.ring)
		return true, nil
	default:
		return false, nil // the slot stays free for the next message
	}
}

// WriteSilence queues samples of silence, waiting for room: a transport
// ends an utterance with it (push-to-talk released) and must not lose it.
func (u *Uplink) WriteSilence(ctx context.Context, samples int) error {
	slot := u.slot(samples)
	clear(slot)
	select {
	case u.in <- pipeline.Input{Audio: slot}:
		u.next = (u.next + 1) % len(u.ring)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// slot returns the next ring buffer, n samples long.
func (u *Uplink) slot(n int) []int16 {
	s := u.ring[u.next]
	if cap(s) < n {
		s = make([]int16, n)
		u.ring[u.next] = s
	}
	return s[:n:n]
}
