package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCPUProfile: --cpuprofile is parsed and startCPUProfile writes a
// pprof profile (gzip) when stopped; a second profile cannot start while
// one runs.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vb.prof")
	o, err := parseFlags([]string{"--cpuprofile", path}, io.Discard)
	if err != nil || o.cpuProfile != path {
		t.Fatalf("parseFlags: %+v, %v", o.cpuProfile, err)
	}
	stop, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "second.prof")); err == nil {
		t.Error("a second profile started while one ran")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("profile of %d bytes is not gzip", len(b))
	}
}
