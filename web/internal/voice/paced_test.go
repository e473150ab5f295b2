package voice

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
)

// fakeTrack records the packets a Paced writes.
type fakeTrack struct {
	packets [][]byte
	fail    error
	dropped int
}

func (f *fakeTrack) WritePacket(packet []byte) error {
	if f.fail != nil {
		return f.fail
	}
	f.packets = append(f.packets, append([]byte(nil), packet...))
	return nil
}

func (f *fakeTrack) EncodeFailed(error, int) { f.dropped++ }

func newTestPaced(t *testing.T) (*Paced, *fakeTrack) {
	t.Helper()
	tr := &fakeTrack{}
	p, err := NewPaced(48000, 24000, tr)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	return p, tr
}

func tone(n int) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pcm[i] = int16(8000 * ((i/24)%2*2 - 1)) // a 1 kHz square wave
	}
	return pcm
}

func TestPacedKeepsWallTimePace(t *testing.T) {
	p, tr := newTestPaced(t)
	t0 := time.Unix(1000, 0)
	pump := func(at time.Duration) int {
		t.Helper()
		before := len(tr.packets)
		if err := p.Pump(t0.Add(at)); err != nil {
			t.Fatal(err)
		}
		return len(tr.packets) - before
	}
	if n := pump(0); n != 1 {
		t.Fatalf("first tick wrote %d packets, want 1", n)
	}
	if n := pump(5 * time.Millisecond); n != 0 {
		t.Fatalf("a tick 5 ms later wrote %d packets, want 0 (the stream is ahead)", n)
	}
	if n := pump(20 * time.Millisecond); n != 1 {
		t.Fatalf("next frame's tick wrote %d packets, want 1", n)
	}
	// A late tick writes every packet due: RTP time must keep wall time.
	if n := pump(100 * time.Millisecond); n != 4 {
		t.Fatalf("a tick 80 ms late wrote %d packets, want 4", n)
	}
	// A stall beyond 200 ms starts over instead of a burst of silence.
	if n := pump(time.Second); n != 1 {
		t.Fatalf("after a 900 ms stall the tick wrote %d packets, want 1", n)
	}
	for i, pkt := range tr.packets {
		if !bytes.Equal(pkt, p.silence) {
			t.Fatalf("packet %d is not the silence packet with nothing queued", i)
		}
	}
}

func TestPacedQueueAndDrop(t *testing.T) {
	p, tr := newTestPaced(t)
	frame := 48000 / 1000 * FrameMs
	if !p.Idle() || p.Full() {
		t.Fatalf("new stream: idle %v full %v, want idle and not full", p.Idle(), p.Full())
	}
	for i := 0; i < PacedQueueFrames; i++ {
		p.Queue(tone(frame))
	}
	if !p.Full() || p.Idle() {
		t.Fatalf("after %d frames: full %v idle %v, want full", PacedQueueFrames, p.Full(), p.Idle())
	}
	t0 := time.Unix(1000, 0)
	if err := p.Pump(t0); err != nil {
		t.Fatal(err)
	}
	if p.Full() {
		t.Fatal("still full after the stream took a frame")
	}
	if len(tr.packets) != 1 || bytes.Equal(tr.packets[0], p.silence) {
		t.Fatal("the queued answer frame did not go out first")
	}
	p.Queue(tone(frame)) // compacts the queue: head > 0 and it was at capacity
	if !p.Full() {
		t.Fatal("not full again after refilling the freed slot")
	}
	p.Drop()
	if !p.Idle() || p.Full() {
		t.Fatal("Drop left answer frames queued")
	}
	if err := p.Pump(t0.Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tr.packets[1], p.silence) {
		t.Fatal("a dropped answer's frame went out after Drop")
	}
	// A frame shorter than a packet is dropped by the encoder's framing:
	// the stream keeps its pace with silence.
	p.Queue(tone(frame / 2))
	if err := p.Pump(t0.Add(40 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if len(tr.packets) != 3 || !bytes.Equal(tr.packets[2], p.silence) {
		t.Fatal("a partial frame did not leave silence in its place")
	}
}

func TestPacedStopsAtFailedWrite(t *testing.T) {
	p, tr := newTestPaced(t)
	tr.fail = errors.New("track closed")
	if err := p.Pump(time.Unix(1000, 0)); !errors.Is(err, tr.fail) {
		t.Fatalf("Pump = %v, want the track's error", err)
	}
	if !p.sentUntil.IsZero() {
		t.Fatal("a failed write advanced the stream's clock")
	}
}

func TestNegotiatedRules(t *testing.T) {
	var r NegotiatedRules
	if ev, p := r.Parse([]byte(`{"type":"interrupt","turn":1}`)); ev != nil || p == nil || p.Code != pipeline.CodeNotStarted {
		t.Fatalf("interrupt before running: %v %v, want not_started", ev, p)
	}
	if ev, p := r.Parse([]byte(`{"type":"start","sample_rate":48000}`)); ev != nil || p != nil {
		t.Fatalf("first start: %v %v, want neither event nor problem", ev, p)
	}
	if _, p := r.Parse([]byte(`{"type":"start"}`)); p == nil || p.Code != pipeline.CodeBadMessage {
		t.Fatalf("second start: %v, want bad_message", p)
	}
	r.Running()
	ev, p := r.Parse([]byte(`{"type":"interrupt","turn":3,"played_ms":120}`))
	if p != nil || ev == nil || ev.Type != pipeline.ClientInterrupt || ev.Turn != 3 || ev.PlayedMs != 120 {
		t.Fatalf("interrupt while running: %+v %v", ev, p)
	}
}

type countingTrack struct{ n int }

func (c *countingTrack) WritePacket([]byte) error { c.n++; return nil }
func (c *countingTrack) EncodeFailed(error, int)  {}

func TestPacedNoAllocationPerFrame(t *testing.T) {
	tr := &countingTrack{}
	p, err := NewPaced(48000, 24000, tr)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	frame := tone(48000 / 1000 * FrameMs)
	now := time.Unix(1000, 0)
	allocs := testing.AllocsPerRun(200, func() {
		p.Queue(frame)
		now = now.Add(frameDur)
		if err := p.Pump(now); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per paced frame, want 0", allocs)
	}
	if tr.n < 200 {
		t.Fatalf("%d packets written over 200 frames", tr.n)
	}
}

// recordingSink is a Sink that records what Serve tells it.
type recordingSink struct {
	countingTrack
	events  []string
	refuse  bool // Event fails
	stopped int
}

func (s *recordingSink) Event(ev pipeline.Event) bool {
	s.events = append(s.events, ev.Type)
	return !s.refuse
}
func (s *recordingSink) Stop()          { s.stopped++ }
func (s *recordingSink) Tick(time.Time) {}

func TestPacedServeDropsCutAnswerAndDrainsAfterFailure(t *testing.T) {
	s := &recordingSink{}
	p, err := NewPaced(48000, 24000, s)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	out := make(chan pipeline.Output)
	done := make(chan struct{})
	go func() { defer close(done); p.Serve(out, s) }()
	frame := tone(48000 / 1000 * FrameMs)
	for range 5 {
		out <- pipeline.Output{Audio: frame}
	}
	out <- pipeline.Output{Event: &pipeline.Event{Type: pipeline.EventInterrupted}}
	close(out)
	<-done
	if !p.Idle() {
		t.Fatal("the cut answer's frames are still queued after EventInterrupted")
	}
	if len(s.events) != 1 || s.events[0] != pipeline.EventInterrupted || s.stopped != 0 {
		t.Fatalf("events %v, stopped %d: want the interruption only, not stopped", s.events, s.stopped)
	}

	s = &recordingSink{refuse: true}
	if p, err = NewPaced(48000, 24000, s); err != nil {
		t.Fatal(err)
	}
	out = make(chan pipeline.Output)
	done = make(chan struct{})
	go func() { defer close(done); p.Serve(out, s) }()
	for range 3 { // Serve reads on after the failure: these sends return
		out <- pipeline.Output{Event: &pipeline.Event{Type: pipeline.EventTranscript}}
	}
	close(out)
	<-done
	if s.stopped != 1 || len(s.events) != 1 {
		t.Fatalf("after a failed event: stopped %d times, %d events sent; want once and 1", s.stopped, len(s.events))
	}
}
