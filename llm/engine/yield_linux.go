//go:build linux

package engine

import "syscall"

// yieldCPU offers the core to another runnable thread (sched_yield): a
// poll inside a pass keeps its thread but does not hold a contended core.
func yieldCPU() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
