package voice

import (
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

const (
	// PacedQueueFrames bounds the answer frames a Paced holds: well above
	// what the pipeline's pacer hands over early (output_lead_ms); once
	// full, the transport stops reading the session's output.
	PacedQueueFrames = 32
	// pacedMaxStall is how far the stream may fall behind wall time before
	// it starts over instead of catching up with silence.
	pacedMaxStall = 200 * time.Millisecond
	frameDur      = FrameMs * time.Millisecond
)

// Track is where a Paced stream goes: a transport's outbound Opus track
// (a pion track for WebRTC, a LiveKit track for the agent).
type Track interface {
	// WritePacket writes one FrameMs Opus packet. The packet is valid only
	// during the call. An error stops the stream (the Track logs it).
	WritePacket(packet []byte) error
	// EncodeFailed counts an answer frame of samples the encoder dropped;
	// silence takes its place in the stream.
	EncodeFailed(err error, samples int)
}

// Paced is the answer audio of an RTP transport (WebRTC, LiveKit), paced to
// wall time: answer frames wait in a queue for their turn in that pace, and
// silence fills the stream between answers, so the receiver's jitter
// buffer and RTP timestamps follow wall time.
//
// The pipeline's pacer hands frames over up to output_lead_ms ahead of real
// time, which RTP cannot use: the receiver plays a packet at its RTP time,
// and packets that arrive ahead of the stream's pace make the ones after
// them look late, so Chromium's jitter buffer grew to 90-120 ms with
// jitterBufferTarget 0. The lead waits here instead, still absorbing the
// pipeline's scheduling jitter, and events are not held behind it.
//
// One goroutine owns a Paced (the transport's only reader of the session's
// output); frames go from the queue straight to the encoder and the track.
type Paced struct {
	track     Track
	down      *Downlink
	silence   []byte    // one FrameMs Opus packet of digital silence
	sentUntil time.Time // the wall time the audio written so far covers: RTP time + an offset
	// queue holds answer frames (each owned by the Paced once queued) from
	// head on; its capacity is PacedQueueFrames.
	queue [][]int16
	head  int
}

// NewPaced returns a Paced stream of FrameMs Opus packets at rate and
// bitrate, written to track.
func NewPaced(rate, bitrate int, track Track) (*Paced, error) {
	down, err := NewOpusDownlink(rate, bitrate, FrameMs)
	if err != nil {
		return nil, err
	}
	silenceEnc, err := audio.NewOpusEncoder(rate, bitrate)
	if err != nil {
		return nil, err
	}
	packet := make([]byte, audio.MaxOpusPacket)
	n, err := silenceEnc.Encode(make([]int16, rate/1000*FrameMs), packet)
	if err != nil {
		return nil, err
	}
	return &Paced{track: track, down: down, silence: append([]byte(nil), packet[:n]...),
		queue: make([][]int16, 0, PacedQueueFrames)}, nil
}

// Full reports whether the queue is full: the transport must not read the
// session's output until the stream has taken a frame.
func (p *Paced) Full() bool { return len(p.queue) == cap(p.queue) && p.head == 0 }

// Idle reports whether no answer audio waits.
func (p *Paced) Idle() bool { return p.head == len(p.queue) }

// Queue takes one answer frame; the Paced owns pcm from here on. Call it
// only when !Full.
func (p *Paced) Queue(pcm []int16) {
	if p.head > 0 && len(p.queue) == cap(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, pcm)
}

// Drop forgets the queued answer frames (a cut turn: its audio must not be
// heard).
func (p *Paced) Drop() {
	clear(p.queue)
	p.queue, p.head = p.queue[:0], 0
}

// Pump tops the stream up to now (until it is under half a frame ahead),
// with queued answer audio or silence. It writes every packet that is due
// even after a late tick: RTP timestamps advance FrameMs a packet, so a
// skipped one would look like growing delay to the receiver. It stops at
// the first failed write and returns its error.
func (p *Paced) Pump(now time.Time) error {
	for p.sentUntil.Before(now.Add(frameDur / 2)) {
		if err := p.writeNext(now); err != nil {
			return err
		}
	}
	return nil
}

// writeNext writes the next queued answer frame, or silence when none
// waits.
func (p *Paced) writeNext(now time.Time) error {
	if p.head == len(p.queue) {
		return p.write(p.silence, now)
	}
	pcm := p.queue[p.head]
	p.queue[p.head] = nil
	p.head++
	if p.head == len(p.queue) {
		p.queue, p.head = p.queue[:0], 0
	}
	packet, err := p.down.Write(pcm)
	if err != nil {
		p.track.EncodeFailed(err, len(pcm))
	}
	if packet == nil { // dropped
		packet = p.silence // the stream keeps its pace
	}
	return p.write(packet, now)
}

// write sends one packet and advances the stream's wall clock.
func (p *Paced) write(packet []byte, now time.Time) error {
	if err := p.track.WritePacket(packet); err != nil {
		return err
	}
	if p.sentUntil.Before(now.Add(-pacedMaxStall)) {
		p.sentUntil = now // the first packet, or the process stalled: start over
	}
	p.sentUntil = p.sentUntil.Add(frameDur)
	return nil
}

// Sink is the transport's side of Serve.
type Sink interface {
	Track
	// Event sends one session event at once (EventInterrupted after the
	// queue is dropped); false stops the stream.
	Event(ev pipeline.Event) bool
	// Stop is told once, when a write or an event failed: the transport
	// ends the session. Serve goes on reading out to its end.
	Stop()
	// Tick follows each tick's top-up (the LiveKit agent ends a draining
	// job there).
	Tick(now time.Time)
}

// Serve is the transport's only reader of out, until the session closes
// it: events go to s at once, answer frames wait in the queue, and every
// FrameMs tick tops the stream up. While the queue is full out is not
// read, so the pipeline's pacer waits. It reads out to the end even after
// a failure, so the session never blocks on it.
func (p *Paced) Serve(out <-chan pipeline.Output, s Sink) {
	tick := time.NewTicker(frameDur)
	defer tick.Stop()
	failed := false
	for {
		in := out
		if p.Full() {
			in = nil // full: the pacer waits
		}
		select {
		case o, ok := <-in:
			if !ok {
				return
			}
			if failed {
				continue
			}
			if o.Event == nil {
				p.Queue(o.Audio)
				continue
			}
			if o.Event.Type == pipeline.EventInterrupted {
				p.Drop() // the cut turn's audio must not be heard
			}
			if !s.Event(*o.Event) {
				failed = true
				s.Stop()
			}
		case now := <-tick.C:
			if !failed && p.Pump(now) != nil {
				failed = true
				s.Stop()
			}
			s.Tick(now)
		}
	}
}
