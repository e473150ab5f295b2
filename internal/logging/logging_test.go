package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestNewJSONWhenNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	log.Info().Str("session", "s1").Msg("hello")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("have %d lines %q, want 1 (debug filtered)", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %v: %q", err, lines[0])
	}
	if rec["message"] != "hello" || rec["session"] != "s1" || rec["level"] != "info" {
		t.Fatalf("have %v", rec)
	}
}

func TestNewConsoleForced(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "debug", FormatConsole)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("visible")
	if !strings.Contains(buf.String(), "visible") || strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("have %q, want console text", buf.String())
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	if _, err := New(&bytes.Buffer{}, "loud", FormatAuto); !errors.Is(err, ErrLevel) {
		t.Fatalf("level: have %v, want ErrLevel", err)
	}
	if _, err := New(&bytes.Buffer{}, "info", "xml"); !errors.Is(err, ErrFormat) {
		t.Fatalf("format: have %v, want ErrFormat", err)
	}
}
