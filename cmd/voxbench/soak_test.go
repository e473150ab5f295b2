package main

import (
	"io"
	"strings"
	"testing"
)

func TestSoakFlags(t *testing.T) {
	if _, err := parseSoakFlags(nil, io.Discard); err == nil {
		t.Error("no --server and no --url accepted")
	}
	if _, err := parseSoakFlags([]string{"--server", "a", "--url", "ws://x/ws"}, io.Discard); err == nil {
		t.Error("both --server and --url accepted")
	}
	o, err := parseSoakFlags([]string{"--url", "ws://x/ws", "--duration", "2m"}, io.Discard)
	if err != nil || o.sessions != 16 || o.duration.Minutes() != 2 {
		t.Errorf("%+v %v", o, err)
	}
}

// judge flags what a soak must not show, and only that.
func TestSoakJudge(t *testing.T) {
	ok := 0
	clean := soakReport{
		Start: procSample{Goroutines: 20, OpenFiles: 15}, End: procSample{Goroutines: 25, OpenFiles: 16},
		ExitCode: &ok,
		Stats:    &soakStats{Errors: map[string]int{"bad_audio": 3, "turn_cut": 2}, CutsExpected: 2, CutsReported: 2},
	}
	if bad := judge(clean); len(bad) != 0 {
		t.Errorf("a clean run judged %q", bad)
	}
	one := 1
	dirty := soakReport{
		Start: procSample{Goroutines: 20, OpenFiles: 15}, End: procSample{Goroutines: 90, OpenFiles: 40, Sessions: 2},
		ExitCode: &one,
		Stats:    &soakStats{Errors: map[string]int{"internal_error": 1}, CutsExpected: 3, CutsReported: 1, Incomplete: 2},
	}
	bad := strings.Join(judge(dirty), "\n")
	for _, want := range []string{"internal_error", "2 of 3 cut turns", "exit code 1", "2 completed turns", "more goroutines", "more open files", "sessions still active"} {
		if !strings.Contains(bad, want) {
			t.Errorf("judge missed %q in:\n%s", want, bad)
		}
	}
}
