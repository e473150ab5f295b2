package procs

import (
	"os"
	"runtime"
	"testing"
)

func TestSpareForCgo(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	got := SpareForCgo()
	want := 2 * before
	if os.Getenv("GOMAXPROCS") != "" {
		want = before
	}
	if got != want || runtime.GOMAXPROCS(0) != want {
		t.Fatalf("SpareForCgo() = %d, GOMAXPROCS %d; want %d (from %d)", got, runtime.GOMAXPROCS(0), want, before)
	}
	if again := SpareForCgo(); again != want {
		t.Fatalf("a second call gave %d, want %d unchanged", again, want)
	}
}
