package main

import (
	"context"
	"sync"
	"time"
)

// framePeriod is the microphone's frame: every device sends one frame of
// audio (speech or silence) per period, in real time.
const framePeriod = 20 * time.Millisecond

// frameClock is a level's microphone clock. A session's ticks fall on a
// grid anchored at the level's start and offset by its phase: session i's
// phase is its arrival time, i×stagger, modulo the frame period, which is
// where its own ticker used to start (give or take its connect time).
// Sessions of the same phase are woken by one timer instead of one timer
// each: with the default stagger (370 ms) every session has phase 0 or
// 10 ms, so eight sessions cost 100 wake-ups a second instead of 400. A
// wake-up costs far more than the frame it sends (the kernel's and the Go
// runtime's sleep and wake path: voxbench's CPU is mostly that), and each
// session still sends its own frame every 20 ms, stamped when it is sent.
type frameClock struct {
	start time.Time
	wake  chan struct{} // a subscription came or went: recompute the next tick

	mu    sync.Mutex
	subs  map[time.Duration]map[chan time.Time]struct{} // by phase
	last  map[time.Duration]time.Time                   // each phase's latest tick
	wakes int                                           // timer wake-ups so far
}

func newFrameClock(start time.Time) *frameClock {
	return &frameClock{start: start, wake: make(chan struct{}, 1),
		subs: map[time.Duration]map[chan time.Time]struct{}{}, last: map[time.Duration]time.Time{}}
}

// phaseOf is the phase of a session arriving offset after the level's start.
func phaseOf(offset time.Duration) time.Duration {
	return (offset%framePeriod + framePeriod) % framePeriod
}

// subscribe returns a channel that receives a tick every frame period at
// phase, and the function that ends the subscription (and closes the
// channel). Like a time.Ticker's, the channel holds one tick: a receiver
// that falls behind misses ticks rather than getting them late. A nil
// clock gives the session a ticker of its own.
func (c *frameClock) subscribe(phase time.Duration) (<-chan time.Time, func()) {
	if c == nil {
		t := time.NewTicker(framePeriod)
		return t.C, t.Stop
	}
	phase = phaseOf(phase)
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	if c.subs[phase] == nil {
		c.subs[phase] = map[chan time.Time]struct{}{}
	}
	c.subs[phase][ch] = struct{}{}
	c.mu.Unlock()
	c.poke()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs[phase], ch)
		if len(c.subs[phase]) == 0 {
			delete(c.subs, phase)
		}
		close(ch)
		c.mu.Unlock()
		c.poke()
	}
}

func (c *frameClock) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// next returns the earliest tick due after now among the phases
// subscribed (each phase's next grid point after its latest tick), and
// false when nobody is subscribed. c.mu is held.
func (c *frameClock) next(now time.Time) (time.Time, bool) {
	var due time.Time
	for phase := range c.subs {
		d := c.due(phase, now)
		if due.IsZero() || d.Before(due) {
			due = d
		}
	}
	return due, !due.IsZero()
}

// due is phase's next tick: the first grid point at or after now that it
// has not ticked yet. c.mu is held.
func (c *frameClock) due(phase time.Duration, now time.Time) time.Time {
	base := c.start.Add(phase)
	k := max(0, (now.Sub(base)+framePeriod-1)/framePeriod)
	d := base.Add(k * framePeriod)
	if !d.After(c.last[phase]) {
		d = c.last[phase].Add(framePeriod)
	}
	return d
}

// run ticks until ctx ends.
func (c *frameClock) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		due, ok := c.next(time.Now())
		c.mu.Unlock()
		var fire <-chan time.Time
		if ok {
			timer.Reset(time.Until(due))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			timer.Stop()
		case now := <-fire:
			c.tick(due, now)
		}
	}
}

// tick sends now to every subscriber of each phase with a tick due by
// now (the timer was set for due).
func (c *frameClock) tick(due, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wakes++
	for phase, subs := range c.subs {
		d := c.due(phase, due)
		if d.After(now) {
			continue
		}
		// The latest grid point by now: a phase more than a period late
		// misses ticks, as a time.Ticker's receiver would.
		d = d.Add(now.Sub(d) / framePeriod * framePeriod)
		c.last[phase] = d
		for ch := range subs {
			select {
			case ch <- now:
			default:
			}
		}
	}
}
