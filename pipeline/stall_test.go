//go:build cgo

package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// stallPeer is one session driven by hand: the test decides when (and
// whether) its output is read.
type stallPeer struct {
	t      *testing.T
	in     chan Input
	out    chan Output
	cancel context.CancelFunc
	done   chan error
	speech []int16
	quiet  []int16
}

func startStallPeer(t *testing.T, wg *sync.WaitGroup, synth tts.Synthesizer, transcript, reply string) *stallPeer {
	t.Helper()
	cfg := testConfig()
	m := &scriptedLLM{scripts: []llmScript{answer(reply)}}
	s, err := NewSession(transcript, cfg, Backends{ASR: &fakeASR{transcripts: []string{transcript}, minFrames: 5}, LLM: m, TTS: synth},
		nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.InputRate * frameMs / 1000
	p := &stallPeer{t: t, in: make(chan Input), out: make(chan Output), done: make(chan error, 1),
		speech: tone(n, cfg.InputRate, 220, 8000), quiet: make([]int16, n)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	wg.Go(func() { p.done <- s.Run(ctx, p.in, p.out) })
	t.Cleanup(func() { cancel(); m.wg.Wait() })
	return p
}

// say streams one utterance at real-time pace: speech, then enough silence
// for the VAD to end it.
func (p *stallPeer) say() {
	for i := range 10 + 20 + 35 {
		frame := p.quiet
		if i >= 10 && i < 30 {
			frame = p.speech
		}
		select {
		case p.in <- Input{Audio: append([]int16(nil), frame...)}:
		case <-time.After(10 * time.Second):
			p.t.Fatal("session does not read its input")
		}
		time.Sleep(frameDur)
	}
}

// firstFrame reads output until the first audio frame.
func (p *stallPeer) firstFrame(within time.Duration) bool {
	deadline := time.After(within)
	for {
		select {
		case o := <-p.out:
			if o.Audio != nil {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestStalledClientDelaysNoOtherSession: a client that stops reading (its
// transport blocks the pacer, which backs up the TTS stage) must not keep
// another session's answer from being synthesized. Both share the process's
// one flite engine, as every session of a server does; the stalled
// answer is a single long chunk, so the stall begins mid-synthesis.
func TestStalledClientDelaysNoOtherSession(t *testing.T) {
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		t.Skipf("flite unavailable: %v", err)
	}
	defer synth.Close()
	var wg sync.WaitGroup
	long := strings.Repeat("and the little fox kept on walking through the tall grass ", 3) + "until the sun went down."
	stalled := startStallPeer(t, &wg, synth, "tell me a story", long)
	healthy := startStallPeer(t, &wg, synth, "what time is it", "It is ten past four.")
	defer func() { // also after a failed check: end both, leave no goroutine
		stalled.cancel()
		healthy.cancel()
		wg.Wait()
	}()

	stalled.say()
	if !stalled.firstFrame(30 * time.Second) {
		t.Fatal("the stalled session's answer never started")
	}
	// From here on nobody reads the stalled session's output.
	healthy.say()
	if !healthy.firstFrame(20 * time.Second) { // deadlock detection, not a timing goal
		t.Fatal("a healthy session got no answer audio in 20 s while another session's client had stopped reading")
	}
	stalled.cancel()
	healthy.cancel()
	for _, p := range []*stallPeer{stalled, healthy} {
		if err := <-p.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}
}
