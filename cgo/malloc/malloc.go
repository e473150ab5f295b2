//go:build cgo && linux

// Package malloc tunes glibc's allocator for a long-running server whose C
// libraries (pocketsphinx, flite, espeak-ng, opus) allocate and free large
// blocks from many threads.
//
// Two glibc defaults make such a process's RSS creep: every thread that
// calls malloc may get an arena of its own (up to 8 per core), and freed
// memory stays in the arena it came from; and the mmap threshold adapts
// upwards after a large mmapped block is freed, so later large blocks (a
// decoder's lattice, a synthesis buffer) come from the arenas too and stay
// there once freed. Tune fixes the arena count and the mmap threshold, and
// Trim gives the arenas' free memory back to the kernel.
//
// # Concurrency
//
// Tune, Trim and Stats are safe for concurrent use.
package malloc

/*
#include <malloc.h>
*/
import "C"

// Config is what Tune sets; zero fields keep glibc's value.
type Config struct {
	// Arenas bounds the malloc arenas (M_ARENA_MAX).
	Arenas int
	// MmapThreshold fixes the size from which blocks are mmapped (and
	// unmapped when freed), disabling glibc's upward adjustment
	// (M_MMAP_THRESHOLD), in bytes.
	MmapThreshold int
}

// DefaultConfig: 4 arenas and 256 KiB.
func DefaultConfig() Config { return Config{Arenas: 4, MmapThreshold: 256 << 10} }

// Tune applies cfg; it reports whether glibc accepted every setting.
func Tune(cfg Config) bool {
	ok := true
	if cfg.Arenas > 0 {
		ok = C.mallopt(C.M_ARENA_MAX, C.int(cfg.Arenas)) == 1 && ok
	}
	if cfg.MmapThreshold > 0 {
		ok = C.mallopt(C.M_MMAP_THRESHOLD, C.int(cfg.MmapThreshold)) == 1 && ok
	}
	return ok
}

// Trim returns free memory at the top and inside every arena to the
// kernel (malloc_trim(0)); it reports whether any was released. It walks
// every arena under its lock: a few milliseconds on a large heap.
func Trim() bool { return C.malloc_trim(0) == 1 }

// Stats is what glibc holds, in bytes.
type Stats struct {
	Arena   int64 // obtained with brk or arena heaps
	Mmapped int64 // in mmapped blocks
	InUse   int64 // allocated and not freed
	Free    int64 // free in the arenas (what Trim can release, at most)
}

// Read returns the allocator's totals (mallinfo2).
func Read() Stats {
	mi := C.mallinfo2()
	return Stats{
		Arena:   int64(mi.arena),
		Mmapped: int64(mi.hblkhd),
		InUse:   int64(mi.uordblks),
		Free:    int64(mi.fordblks),
	}
}
