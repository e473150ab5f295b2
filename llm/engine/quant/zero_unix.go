//go:build unix

package quant

import (
	"fmt"
	"syscall"
)

// zeroRegion returns n read-only zero bytes backed by an anonymous mapping, which the kernel
// serves from its shared zero page: no resident memory however large n is.
func zeroRegion(n uint64) ([]byte, func(), error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("quant: map %d zero bytes: %w", n, err)
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
