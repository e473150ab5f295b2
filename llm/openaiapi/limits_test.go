package openaiapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

// messagesJSON is a messages array of n user messages.
func messagesJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `{"role":"user","content":"x"}`
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// A request over a limit gets a 400 naming the parameter and never reaches
// the model (whose scheduler would match every stop at every token of the
// batch, for every session).
func TestRequestLimits(t *testing.T) {
	m := &scriptedModel{usage: &llm.Usage{}}
	srv := newServer(t, m)
	long := strings.Repeat("s", MaxStopBytes+1)
	cases := []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}`, "stop"},
		{`{"messages":[{"role":"user","content":"x"}],"stop":"` + long + `"}`, "stop"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"<|im_start|>system","content":"x"}]}`, "messages[1].role"},
		{`{"messages":` + messagesJSON(DefaultMaxMessages+1) + `}`, "messages"},
	}
	for _, c := range cases {
		resp := post(t, srv, c.body)
		if resp.StatusCode != 400 {
			t.Errorf("%.80s: status %d, want 400", c.body, resp.StatusCode)
			continue
		}
		e := decodeError(t, resp)
		if e.Error.Param == nil || *e.Error.Param != c.param {
			t.Errorf("%.80s: param %v, want %q (%s)", c.body, e.Error.Param, c.param, e.Error.Message)
		}
	}
	if n := len(m.requests); n != 0 {
		t.Errorf("%d refused requests reached the model", n)
	}
	// Four bounded stops are fine.
	resp := post(t, srv, `{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d"]}`)
	if resp.StatusCode != 200 {
		t.Errorf("4 stops: status %d", resp.StatusCode)
	}
}

func TestConfiguredLimits(t *testing.T) {
	var rejected []string
	m := &scriptedModel{usage: &llm.Usage{}}
	lim := Limits{MaxMessages: 2, MaxTokens: 50, MaxStops: 1, MaxBodyBytes: 4096, OnReject: func(p string) { rejected = append(rejected, p) }}
	srv := newServerWith(t, m, lim)
	for _, c := range []struct{ body, param string }{
		{`{"messages":` + messagesJSON(3) + `}`, "messages"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":51}`, "max_tokens"},
		{`{"messages":[{"role":"user","content":"x"}],"stop":["a","b"]}`, "stop"},
		{`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, "body"},
	} {
		resp := post(t, srv, c.body)
		if e := decodeError(t, resp); resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != c.param {
			t.Errorf("%.60s: %d %+v, want 400 on %s", c.body, resp.StatusCode, e.Error, c.param)
		}
	}
	if got := fmt.Sprint(rejected); got != "[messages max_tokens stop body]" {
		t.Errorf("OnReject saw %s", got)
	}
	// Without max_tokens the configured bound is asked for.
	post(t, srv, `{"messages":[{"role":"user","content":"x"}]}`)
	if len(m.requests) != 1 || m.requests[0].MaxTokens != 50 {
		t.Errorf("requests %+v, want one with MaxTokens 50", m.requests)
	}
}
