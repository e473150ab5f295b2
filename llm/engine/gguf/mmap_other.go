//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads path into memory and parses it (no mmap on this platform).
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap = func() error { return nil }
	return f, nil
}
