package web

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/record"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// TestSessionRecorded: with a Recorder a /ws session leaves one complete
// recording: the audio sent and answered, and the events with the
// transcript, the answer and the trace.
func TestSessionRecorded(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	rec, err := record.New(record.Config{Dir: dir, MaxRecordings: 10}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, []string{"It is sunny today."}, func(c *Config) { c.Recorder = rec })
	a, ready := dialResume(t, ts.url, startMsg(16000, EncodingPCM16))
	if ready.Type != pipeline.EventReady {
		t.Fatalf("ready: %+v", ready)
	}
	began := time.Now()
	a.say(utterance(t, "what is the weather like today", 16000))
	said := a.until("the final transcript", finalOf(1)).Text
	a.until("the trace", traceOf(1))
	a.mu.Lock()
	_ = a.ws.WriteJSON(map[string]any{"type": "stop"})
	a.mu.Unlock()
	for range a.events {
	}
	sent := time.Since(began)
	waitIdle(t, ts.srv)

	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || strings.HasPrefix(entries[0].Name(), ".") {
		t.Fatalf("recordings %v, want one finished", entries)
	}
	final := filepath.Join(dir, entries[0].Name())
	for _, f := range []struct {
		name     string
		minSecs  float64
		maxSecs  float64
		wantRate int
	}{{"in.wav", 1.5, sent.Seconds() + 1, 16000}, {"out.wav", 0.5, 30, 16000}} {
		data, err := os.ReadFile(filepath.Join(final, f.name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := audio.DecodeWAV(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if d := w.Duration(); w.SampleRate != f.wantRate || d < f.minSecs || d > f.maxSecs {
			t.Errorf("%s: %.2f s at %d Hz, want %.1f..%.1f s at %d", f.name, d, w.SampleRate, f.minSecs, f.maxSecs, f.wantRate)
		}
	}
	events, err := os.ReadFile(filepath.Join(final, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"text":"` + said + `","final":true`, `"text":"sunny "`, `"type":"trace"`, `"dir":"in","event":{"type":"stop"`} {
		if !strings.Contains(string(events), want) {
			t.Errorf("events.jsonl lacks %s:\n%s", want, events)
		}
	}
}
