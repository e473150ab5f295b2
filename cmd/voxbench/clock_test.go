package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/pipeline"
)

// TestFrameClock: sessions tick every frame period on the level's grid at
// their phase, sessions of one phase share a wake-up (the same tick time),
// and a cancelled subscription's channel is closed.
func TestFrameClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	start := time.Now()
	c := newFrameClock(start)
	ctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { c.run(ctx) })
	defer func() { cancel(); run.Wait() }()

	phases := []time.Duration{phaseOf(0), phaseOf(370 * time.Millisecond), phaseOf(740 * time.Millisecond)}
	if phases[1] != 10*time.Millisecond || phases[2] != 0 {
		t.Fatalf("phases %v, want 0 10ms 0", phases)
	}
	const n = 15
	got := make([][]time.Time, len(phases))
	var wg sync.WaitGroup
	for i, ph := range phases {
		ticks, stop := c.subscribe(ph)
		wg.Go(func() {
			defer stop()
			for range n {
				got[i] = append(got[i], <-ticks)
			}
		})
	}
	wg.Wait()
	for i, ts := range got {
		for k, at := range ts {
			off := phaseOf(at.Sub(start))
			// Delivered at its grid point, give or take the timer's lateness.
			if late := phaseOf(off - phases[i]); late > 5*time.Millisecond {
				t.Errorf("session %d tick %d at phase %v, want %v (+<5ms)", i, k, off, phases[i])
			}
			if k > 0 {
				if d := at.Sub(ts[k-1]); d < 10*time.Millisecond || d > 30*time.Millisecond {
					t.Errorf("session %d ticks %d and %d %v apart, want ~20ms", i, k-1, k, d)
				}
			}
		}
	}
	// Sessions 0 and 2 share phase 0: the same wake-ups, the same ticks.
	same := 0
	for _, a := range got[0] {
		for _, b := range got[2] {
			if a.Equal(b) {
				same++
			}
		}
	}
	if same < n-2 {
		t.Errorf("sessions of one phase shared %d of %d ticks", same, n)
	}
	c.mu.Lock()
	wakes := c.wakes
	c.mu.Unlock()
	// Two phases: two wake-ups a period, not three.
	if wakes > 2*(n+2) {
		t.Errorf("%d wake-ups for %d ticks at two phases", wakes, n)
	}
	ticks, stop := c.subscribe(0)
	stop()
	for range ticks { // closed: the loop ends
	}
}

// TestFrameClockNil: without a level's clock a session gets a ticker of
// its own.
func TestFrameClockNil(t *testing.T) {
	var c *frameClock
	ticks, stop := c.subscribe(0)
	defer stop()
	select {
	case <-ticks:
	case <-time.After(time.Second):
		t.Fatal("no tick from the session's own ticker")
	}
}

// TestInboxWakes: events, and the first answer frame after one, wake
// converse; the frames after that wait for its next tick, in order.
func TestInboxWakes(t *testing.T) {
	in := newInbox()
	woken := func() bool {
		select {
		case <-in.wake:
			return true
		default:
			return false
		}
	}
	ev := wsMsg{ev: &pipeline.Event{Type: pipeline.EventAnswer, Turn: 1}}
	frame := wsMsg{audio: make([]int16, 320)}
	steps := []struct {
		m    wsMsg
		wake bool
	}{{frame, false}, {ev, true}, {frame, true}, {frame, false}, {frame, false}, {ev, true}, {frame, true}}
	for i, s := range steps {
		in.put(s.m, nil)
		if got := woken(); got != s.wake {
			t.Errorf("put %d (audio %v): woke %v, want %v", i, s.m.audio != nil, got, s.wake)
		}
	}
	in.close()
	if !woken() {
		t.Error("close did not wake converse")
	}
	n := 0
	for m := range in.msgs {
		if (m.audio == nil) != (steps[n].m.audio == nil) {
			t.Errorf("message %d out of order", n)
		}
		n++
	}
	if n != len(steps) {
		t.Errorf("%d messages, want %d", n, len(steps))
	}
	done := make(chan struct{})
	close(done)
	full := &inbox{msgs: make(chan wsMsg), wake: make(chan struct{}, 1)}
	full.put(frame, done) // returns: done is closed and nobody receives
}
