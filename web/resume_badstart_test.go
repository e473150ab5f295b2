package web

import (
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
)

// Issue 36 item 4: a resuming start the server refuses (here an
// unsupported sample rate) used to take the parked session first, so the
// corrected start got resume_failed and the conversation was lost. The
// refusal must leave the session parked under its token.
func TestResumeSurvivesBadStart(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.Resume = ResumeConfig{TTL: time.Minute} })
	a, ready := dialResume(t, ts.url, startMsg(16000, EncodingPCM16))
	if ready.SessionToken == "" {
		t.Fatalf("ready %+v: no session token", ready)
	}
	a.drop()
	c := dial(t, ts.url)
	for _, bad := range []map[string]any{
		{"type": "start", "resume": ready.SessionToken, "sample_rate": 12345},
		{"type": "start", "resume": ready.SessionToken, "encoding": "mp3"},
		{"type": "start", "resume": ready.SessionToken, "output_sample_rate": 7},
	} {
		sendJSON(t, c, bad)
		if ev := nextEvent(t, c); ev.Type != pipeline.EventError || ev.Code != pipeline.CodeBadFormat {
			t.Fatalf("%v: %+v, want bad_format", bad, ev)
		}
	}
	sendJSON(t, c, resumeMsg(ready.SessionToken))
	ev := nextEvent(t, c)
	if ev.Type != pipeline.EventReady || !ev.Resumed || ev.SampleRate != 16000 {
		t.Fatalf("the corrected resume: %+v, want ready resumed at 16000 Hz", ev)
	}
	stopAndExpectClose(t, c)
	waitIdle(t, ts.srv)
}
