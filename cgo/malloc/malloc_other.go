//go:build !cgo || !linux

package malloc

// Config is what Tune sets (glibc only; see malloc.go).
type Config struct {
	Arenas        int
	MmapThreshold int
}

// DefaultConfig: 4 arenas and 256 KiB.
func DefaultConfig() Config { return Config{Arenas: 4, MmapThreshold: 256 << 10} }

// Tune does nothing without cgo on Linux.
func Tune(Config) bool { return false }

// Trim does nothing without cgo on Linux.
func Trim() bool { return false }

// Stats is what glibc holds, in bytes.
type Stats struct{ Arena, Mmapped, InUse, Free int64 }

// Read returns zeros without cgo on Linux.
func Read() Stats { return Stats{} }
