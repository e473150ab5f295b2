//go:build linux

package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocArena returns anonymous memory for the weights, asking for
// transparent huge pages: streaming weights through 2 MiB pages avoids
// the TLB misses that make 4 KiB page-cache mappings several times slower
// here (see copyWeights).
func allocArena(size int) ([]byte, func() error, error) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // best effort: THP may be off
	return b, func() error { return unix.Munmap(b) }, nil
}

// dropMapped tells the kernel we no longer need the mapped file pages
// behind b, so they stop counting in our resident set (they stay in the
// page cache). b need not be page aligned; only whole pages inside it are
// dropped.
func dropMapped(b []byte) {
	if len(b) == 0 {
		return
	}
	const page = 4096
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	head := int((page - addr%page) % page) // bytes before the first whole page
	n := (len(b) - head) &^ (page - 1)
	if head >= len(b) || n <= 0 {
		return
	}
	_ = unix.Madvise(b[head:head+n], unix.MADV_DONTNEED)
}
