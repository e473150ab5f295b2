package pipeline

import (
	"context"
	"sync"
	"time"
)

// TTSGate orders the speech synthesis of the sessions that share an
// in-process synthesizer. A session's TTS stage synthesises an answer's
// chunks as fast as it can, long before they play; when several answers
// start together (8 sessions whose people stop speaking within a second or
// two), the later chunks of the first answers took the CPU, and flite's
// process-wide lock, from the first chunks of the others, which someone is
// waiting to hear. With a gate, while any answer waits for its first audio
// (from its LLM request until its first chunk is synthesised), a later
// chunk of another answer waits as long as that answer still has more than
// gateLowWater of audio queued ahead of playback, so it still plays without
// a gap.
//
// A nil *TTSGate orders nothing. One gate is shared by every session of a
// server (Backends.TTSGate); its methods are safe for concurrent use.
type TTSGate struct {
	mu      sync.Mutex
	holds   map[*gateHold]time.Time // answers waiting for their first audio, since when
	changed chan struct{}           // closed (and replaced) when a hold is released
}

const (
	// gateLowWater: a later chunk is synthesised once its answer has no
	// more than this left to play, whatever waits. A sentence takes flite
	// tens of milliseconds alone, a few hundred with eight sessions busy.
	gateLowWater = time.Second
	// gateMaxHold: a hold older than this no longer counts (an answer whose
	// first chunk never reached the TTS stage, e.g. its session ended).
	gateMaxHold = 3 * time.Second
	// gatePoll: how often a waiting chunk looks at how much its answer has
	// left to play.
	gatePoll = 20 * time.Millisecond
)

// NewTTSGate returns an empty gate.
func NewTTSGate() *TTSGate {
	return &TTSGate{holds: make(map[*gateHold]time.Time), changed: make(chan struct{})}
}

// gateHold is one answer waiting for its first audio. release is
// idempotent and safe on a nil hold.
type gateHold struct {
	g    *TTSGate
	once sync.Once
}

// hold registers an answer waiting for its first audio; nil for a nil gate.
func (g *TTSGate) hold() *gateHold {
	if g == nil {
		return nil
	}
	h := &gateHold{g: g}
	g.mu.Lock()
	g.holds[h] = time.Now()
	g.mu.Unlock()
	return h
}

func (h *gateHold) release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		g := h.g
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.holds, h)
		close(g.changed)
		g.changed = make(chan struct{})
	})
}

// waiting reports whether an answer waits for its first audio (a hold
// younger than gateMaxHold) and returns the channel closed at the next
// release.
func (g *TTSGate) waiting(now time.Time) (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, since := range g.holds {
		if now.Sub(since) < gateMaxHold {
			return true, g.changed
		}
	}
	return false, g.changed
}

// wait returns when a later chunk of an answer may be synthesised: no
// answer waits for its first audio, or ahead (the answer's audio queued
// and not yet sent) is down to gateLowWater, or ctx ended. It returns how
// long it waited.
func (g *TTSGate) wait(ctx context.Context, ahead func() time.Duration) time.Duration {
	if g == nil {
		return 0
	}
	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		busy, changed := g.waiting(now)
		if !busy || ahead() <= gateLowWater {
			return now.Sub(start)
		}
		if timer == nil {
			timer = time.NewTimer(gatePoll)
		} else {
			timer.Reset(gatePoll)
		}
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-changed:
		case <-timer.C:
		}
	}
}
