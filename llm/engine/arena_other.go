//go:build !linux

package engine

// allocArena returns Go memory for the weights on systems without the
// Linux huge-page hints.
func allocArena(size int) ([]byte, func() error, error) {
	return make([]byte, size), func() error { return nil }, nil
}

func dropMapped([]byte) {}
