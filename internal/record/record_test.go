package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

func record(t *testing.T, r *Recorder, id string, samples int) string {
	t.Helper()
	s, err := r.Start(id, 16000, 48000)
	if err != nil {
		t.Fatal(err)
	}
	s.In(make([]int16, samples))
	s.Out(make([]int16, samples))
	final, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	return final
}

// A recording is invisible under its final name until it is complete; then
// its WAVs decode with the right rates and lengths and its events are JSON
// lines in order, with the direction.
func TestRecordingIsAtomicAndComplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".tmp-crashed"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-crashed", markerName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Dir: dir}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if n := names(t, dir); len(n) != 0 {
		t.Fatalf("a crash's leftover was kept: %v", n)
	}
	s, err := r.Start("abc", 16000, 24000)
	if err != nil {
		t.Fatal(err)
	}
	in := []int16{1, -2, 3, 32767, -32768}
	s.In(in)
	s.Event("out", map[string]any{"type": "transcript", "text": "hello", "final": true})
	s.Out([]int16{7, 8})
	s.Out([]int16{9})
	s.Event("in", map[string]any{"type": "stop"})
	if n := names(t, dir); len(n) != 1 || n[0] != ".tmp-abc" {
		t.Fatalf("while recording the folder holds %v, want only .tmp-abc", n)
	}
	final, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n := names(t, dir); len(n) != 1 || n[0] != filepath.Base(final) || !strings.HasSuffix(final, "-abc") {
		t.Fatalf("after Close the folder holds %v (final %s)", n, final)
	}
	for _, f := range []struct {
		name string
		rate int
		want []int16
	}{{"in.wav", 16000, in}, {"out.wav", 24000, []int16{7, 8, 9}}} {
		data, err := os.ReadFile(filepath.Join(final, f.name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := audio.DecodeWAV(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if got := w.Mono(); w.SampleRate != f.rate || len(got) != len(f.want) || got[len(got)-1] != f.want[len(f.want)-1] {
			t.Errorf("%s: %d Hz %v, want %d Hz %v", f.name, w.SampleRate, got, f.rate, f.want)
		}
	}
	fh, err := os.Open(filepath.Join(final, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var dirs []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var line struct {
			Ms    float64        `json:"ms"`
			Dir   string         `json:"dir"`
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		dirs = append(dirs, line.Dir+":"+line.Event["type"].(string))
	}
	if strings.Join(dirs, ",") != "out:transcript,in:stop" {
		t.Errorf("events %v", dirs)
	}
	if _, err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Retention keeps the newest recordings within the count, the bytes and
// the age; MaxBytes also cuts one recording's audio.
func TestRetention(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		dir := t.TempDir()
		r, _ := New(Config{Dir: dir, MaxRecordings: 2}, zerolog.Nop())
		var finals []string
		for _, id := range []string{"a", "b", "c"} {
			finals = append(finals, filepath.Base(record(t, r, id, 100)))
			time.Sleep(2 * time.Millisecond) // distinct start times
		}
		if n := names(t, dir); len(n) != 2 || n[0] != finals[1] || n[1] != finals[2] {
			t.Errorf("kept %v, want the newest two %v", n, finals[1:])
		}
	})
	t.Run("bytes", func(t *testing.T) {
		dir := t.TempDir()
		// Each recording: 2 × (44 + 2000) bytes of WAV plus events.
		r, _ := New(Config{Dir: dir, MaxBytes: 10000}, zerolog.Nop())
		for _, id := range []string{"a", "b", "c"} {
			record(t, r, id, 1000)
			time.Sleep(2 * time.Millisecond)
		}
		if n := names(t, dir); len(n) != 2 || !strings.HasSuffix(n[0], "-b") {
			t.Errorf("kept %v, want b and c (4 KB each under 10 KB)", n)
		}
		final := record(t, r, "big", 10000) // 20 KB of audio each way: over the bound
		data, _ := os.ReadFile(filepath.Join(final, "in.wav"))
		if len(data) != 44 {
			t.Errorf("in.wav of a recording over max_bytes is %d bytes, want the header only", len(data))
		}
		ev, _ := os.ReadFile(filepath.Join(final, "events.jsonl"))
		if !strings.Contains(string(ev), "max_bytes") {
			t.Errorf("events %q do not say the audio was cut", ev)
		}
	})
	t.Run("age", func(t *testing.T) {
		dir := t.TempDir()
		r, _ := New(Config{Dir: dir, MaxAge: 200 * time.Millisecond}, zerolog.Nop())
		record(t, r, "old", 10)
		time.Sleep(300 * time.Millisecond)
		record(t, r, "new", 10)
		if n := names(t, dir); len(n) != 1 || !strings.HasSuffix(n[0], "-new") {
			t.Errorf("kept %v, want only the new one", n)
		}
	})
}

func TestBadIDs(t *testing.T) {
	r, _ := New(Config{Dir: t.TempDir()}, zerolog.Nop())
	for _, id := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := r.Start(id, 16000, 16000); err == nil {
			t.Errorf("Start(%q) succeeded", id)
		}
	}
}
