package pipeline

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestTTSGateNil: without a gate nothing waits.
func TestTTSGateNil(t *testing.T) {
	var g *TTSGate
	h := g.hold()
	h.release()
	if d := g.wait(context.Background(), func() time.Duration { return time.Hour }); d != 0 {
		t.Errorf("nil gate waited %v", d)
	}
}

// TestTTSGateWaitsForFirstChunks: a later chunk with audio queued waits
// while an answer waits for its first audio, and goes at the release; with
// little queued, or no hold, it goes at once.
func TestTTSGateWaitsForFirstChunks(t *testing.T) {
	g := NewTTSGate()
	much := func() time.Duration { return 3 * time.Second }
	little := func() time.Duration { return gateLowWater }
	if d := g.wait(context.Background(), much); d > 50*time.Millisecond {
		t.Errorf("no hold: waited %v", d)
	}
	h := g.hold()
	if d := g.wait(context.Background(), little); d > 50*time.Millisecond {
		t.Errorf("low water: waited %v", d)
	}
	done := make(chan time.Duration, 1)
	go func() { done <- g.wait(context.Background(), much) }()
	select {
	case d := <-done:
		t.Fatalf("returned after %v while an answer waits for its first audio", d)
	case <-time.After(150 * time.Millisecond):
	}
	h.release()
	h.release() // idempotent
	select {
	case d := <-done:
		if d < 150*time.Millisecond {
			t.Errorf("waited %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the release")
	}
}

// TestTTSGateAheadDrains: a waiting chunk goes once its answer's queued
// audio has played down to the low-water mark, hold or not.
func TestTTSGateAheadDrains(t *testing.T) {
	g := NewTTSGate()
	h := g.hold()
	defer h.release()
	var ahead atomic.Int64
	ahead.Store(int64(3 * time.Second))
	done := make(chan struct{})
	go func() {
		g.wait(context.Background(), func() time.Duration { return time.Duration(ahead.Load()) })
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("returned with 3 s queued")
	case <-time.After(100 * time.Millisecond):
	}
	ahead.Store(int64(gateLowWater / 2))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting with the queue under the low-water mark")
	}
}

// TestTTSGateStaleHoldAndCancel: a hold older than gateMaxHold (one never
// released) stops counting; a cancelled turn stops waiting.
func TestTTSGateStaleHoldAndCancel(t *testing.T) {
	g := NewTTSGate()
	h := g.hold()
	much := func() time.Duration { return time.Hour }
	g.mu.Lock()
	g.holds[h] = time.Now().Add(-gateMaxHold)
	g.mu.Unlock()
	if d := g.wait(context.Background(), much); d > 50*time.Millisecond {
		t.Errorf("stale hold: waited %v", d)
	}
	h2 := g.hold()
	defer h2.release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		g.wait(ctx, much)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled wait did not return")
	}
}

// TestTTSGateDefersLaterChunks: in a session, while another answer waits
// for its first audio, the second chunk of this answer is synthesised only
// once the first chunk's audio has played down to gateLowWater; without a
// waiting answer it is synthesised at once. Either way every frame is sent
// and the session's own hold is released.
func TestTTSGateDefersLaterChunks(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprint("other answer waiting=", waiting), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testTTSGateDefers(t, waiting) })
		})
	}
}

func testTTSGateDefers(t *testing.T, waiting bool) {
	// 15 words of 100 ms, then 2: the first chunk is 1.5 s of audio.
	const long = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen. Sixteen seventeen."
	cfg := testConfig()
	a, m, s := newBackends([]string{"tell me"}, answer(long))
	gate := NewTTSGate()
	var other *gateHold
	if waiting {
		other = gate.hold()
	}
	h := &harness{t: t, cfg: cfg, llm: m, tts: s, obs: &recObserver{}}
	sess, err := NewSession("test", cfg, Backends{ASR: a, LLM: m, TTS: s, TTSGate: gate}, h.obs, harnessLog)
	if err != nil {
		t.Fatal(err)
	}
	h.start(sess, m)
	defer h.close()
	synthesised := func() int {
		synctest.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.texts)
	}
	h.utterance()
	h.frames(1)
	if n := synthesised(); waiting && n != 1 || !waiting && n != 2 {
		t.Fatalf("at the first frame %d chunks synthesised, want %d", n, map[bool]int{false: 2, true: 1}[waiting])
	}
	if waiting {
		h.frames(15) // 320 ms sent: 1.18 s still queued
		if n := synthesised(); n != 1 {
			t.Fatalf("%d chunks synthesised with 1.18 s queued, want 1", n)
		}
		h.frames(15) // 620 ms sent: 0.88 s queued
		if n := synthesised(); n != 2 {
			t.Fatalf("%d chunks synthesised with 0.88 s queued, want 2", n)
		}
		other.release()
	}
	outs := h.until("trace event", isEvent(EventTrace))
	sent := 1 + audioFrames(outs)
	if waiting {
		sent += 30
	}
	if sent != 85 {
		t.Errorf("%d frames sent, want 85 (17 words of 100 ms)", sent)
	}
	if busy, _ := gate.waiting(time.Now()); busy {
		t.Error("the session's hold was not released")
	}
}
