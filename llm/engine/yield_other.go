//go:build !linux

package engine

import "runtime"

// yieldCPU lets other goroutines run; without sched_yield a poll inside a
// pass only gives way inside the Go scheduler.
func yieldCPU() { runtime.Gosched() }
