//go:build cgo

package flite

import (
	"context"
	"testing"
	"time"
)

// TestPanicInEmitReleasesTheEngine: a panic inside the chunk callback (Go
// called from flite's C code, with the process-wide engine lock held)
// unwinds out of Synthesize with the lock released: the next synthesis,
// from any goroutine, runs and is complete.
func TestPanicInEmitReleasesTheEngine(t *testing.T) {
	v, err := OpenVoice("kal16")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	func() {
		defer func() {
			cp, ok := recover().(*CallbackPanic)
			if !ok || cp.Value != "emit failed" || len(cp.Stack) == 0 {
				t.Fatalf("recovered %v, want the callback's panic as a *CallbackPanic", cp)
			}
		}()
		_ = v.Synthesize(context.Background(), "One sentence. Then another one.", Options{},
			func([]int16, []WordMark) error { panic("emit failed") })
	}()
	done := make(chan error, 1)
	samples, marks := 0, 0
	go func() {
		done <- v.Synthesize(context.Background(), "Fine again.", Options{}, func(pcm []int16, words []WordMark) error {
			samples += len(pcm)
			marks += len(words)
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || samples == 0 || marks != 2 {
			t.Fatalf("after a panic: err %v, %d samples, %d marks", err, samples, marks)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the engine lock is still held after a panic in the callback")
	}
}
