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

// TestProcsFlag: one thread by default for PCM16 over /ws, Go's default
// with a codec, and what --procs says otherwise.
func TestProcsFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 1},
		{[]string{"--encoding", "opus"}, 0},
		{[]string{"--transport", "rtc", "--url", "http://127.0.0.1:1"}, 0},
		{[]string{"--procs", "3"}, 3},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil || o.procs != c.want {
			t.Errorf("%v: procs %d (%v), want %d", c.args, o.procs, err, c.want)
		}
	}
	if _, err := parseFlags([]string{"--procs", "-1"}, io.Discard); err == nil {
		t.Error("--procs -1 accepted")
	}
}
