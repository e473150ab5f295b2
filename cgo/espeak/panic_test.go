//go:build cgo

package espeak

import (
	"context"
	"testing"
	"time"
)

// TestPanicInEmitReleasesTheEngine: as in cgo/flite, a panic in the
// callback leaves the engine usable and its lock free.
func TestPanicInEmitReleasesTheEngine(t *testing.T) {
	sp, err := New("en-us")
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	func() {
		defer func() {
			cp, ok := recover().(*CallbackPanic)
			if !ok || cp.Value != "emit failed" || len(cp.Stack) == 0 {
				t.Fatalf("recovered %v, want the callback's panic as a *CallbackPanic", cp)
			}
		}()
		_ = sp.Synthesize(context.Background(), "A long text that will not be finished. Another sentence.", Options{},
			func([]int16, []WordMark) error { panic("emit failed") })
	}()
	done := make(chan error, 1)
	var marks []WordMark
	go func() {
		done <- sp.Synthesize(context.Background(), "Three more words.", Options{}, func(_ []int16, words []WordMark) error {
			marks = append(marks, words...)
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || len(marks) != 3 {
			t.Fatalf("after a panic: err %v, marks %+v", err, marks)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the engine lock is still held after a panic in the callback")
	}
}
