//go:build unix

package audio

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the test process has
// used. Benchmarks report it per operation because the development
// machine is shared: wall-clock ns/op there includes time spent waiting
// for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
