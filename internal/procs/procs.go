// Package procs sizes Go's scheduler for programs whose goroutines spend
// long stretches in C: the engine's matrix kernels, pocketsphinx, flite.
package procs

import (
	"os"
	"runtime"
	"sync"
)

var once sync.Once

// SpareForCgo sets GOMAXPROCS to twice Go's default (one spare P per CPU)
// unless the GOMAXPROCS environment variable chose it, and returns the
// value in effect. Calling it again changes nothing. Setting it stops the
// runtime's own updates of GOMAXPROCS (to a changed CPU limit), as any
// explicit setting does.
//
// Why: a goroutine in a cgo call keeps its P. When no P is idle, the
// runtime's monitor takes the P of a call that has run for one of its ticks
// (20 µs and up) and starts a spare thread for it, which finds nothing to
// run and sleeps again; the monitor then ticks fast and does it again. With
// every core in the kernels that is a wake-up and a context switch every
// few tens of µs, taken from the kernels' own time. An idle P stops it: the
// monitor leaves calls alone while one is idle (for up to 10 ms).
// Llama-3.2-1B-shape Q4_0 on the 2-core dev VM, 2 threads, GOMAXPROCS 4
// against 2, 5 alternated rounds: decoding 1.21x, prompts 1.21x.
func SpareForCgo() int {
	once.Do(func() {
		if os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(2 * runtime.GOMAXPROCS(0))
		}
	})
	return runtime.GOMAXPROCS(0)
}
