package timer

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"ten minutes":                    10 * time.Minute,
		"twenty five minutes":            25 * time.Minute,
		"twenty-five minutes":            25 * time.Minute,
		"a minute":                       time.Minute,
		"an hour and a half":             90 * time.Minute,
		"two and a half minutes":         150 * time.Second,
		"half an hour":                   30 * time.Minute,
		"a half hour":                    30 * time.Minute,
		"a quarter of an hour":           15 * time.Minute,
		"three quarters of an hour":      45 * time.Minute,
		"1 minute 30 seconds":            90 * time.Second,
		"two minutes and thirty seconds": 150 * time.Second,
		"90 seconds":                     90 * time.Second,
		"1.5 hours":                      90 * time.Minute,
		"5m":                             5 * time.Minute,
		"1h30m":                          90 * time.Minute,
		"one hundred and twenty seconds": 120 * time.Second,
		"forty five secs":                45 * time.Second,
		"2:30":                           150 * time.Second,
		"a couple of minutes":            2 * time.Minute,
		"for 10 minutes":                 10 * time.Minute,
		"seconds":                        time.Second,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "banana", "soon", "five bananas"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		25 * time.Minute:  "25 minutes",
		90 * time.Second:  "1 minute 30 seconds",
		time.Hour:         "1 hour",
		3*time.Hour + 1e9: "3 hours 1 second",
	} {
		if got := Words(d); got != want {
			t.Errorf("Words(%v) = %q, want %q", d, got, want)
		}
	}
}

// fakeClock fires its timers when told to.
type fakeClock struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *fakeClock) after(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) fire(i int) {
	c.mu.Lock()
	t := c.timers[i]
	c.mu.Unlock()
	if !t.stopped {
		t.f()
	}
}

func call(t *testing.T, s *tools.Set, conv *tools.Conversation, name, args string) tools.Result {
	t.Helper()
	return s.Run(context.Background(), conv, []llm.ToolCall{{ID: "c", Name: name, Arguments: args}})[0]
}

func TestTimerRings(t *testing.T) {
	clk := &fakeClock{}
	s := tools.NewSet(tools.Limits{}, Tools(clk.after))
	conv := tools.NewConversation("k", time.UTC, zerolog.Nop())
	var heard []string
	conv.Attach(func(n tools.Notice) bool { heard = append(heard, n.Text); return true })

	if r := call(t, s, conv, SetName, `{"duration":"five minutes","label":"pasta"}`); r.Outcome != tools.OutcomeOK || r.Content != "Timer set for 5 minutes pasta." {
		t.Fatalf("set: %+v", r)
	}
	if clk.timers[0].d != 5*time.Minute {
		t.Fatalf("timer of %v", clk.timers[0].d)
	}
	if r := call(t, s, conv, SetName, `{"duration":30}`); r.Outcome != tools.OutcomeOK {
		t.Fatalf("set in seconds: %+v", r)
	}
	if r := call(t, s, conv, CancelName, `{}`); !strings.Contains(r.Content, "Cancelled the 30 seconds timer") {
		t.Fatalf("cancel picks the latest: %+v", r)
	}
	clk.fire(1) // cancelled: silent
	clk.fire(0)
	if strings.Join(heard, "|") != "Your 5 minutes timer for pasta is done." {
		t.Fatalf("heard %q", heard)
	}
	if r := call(t, s, conv, CancelName, `{}`); r.Content != "There is no timer running." {
		t.Fatalf("cancel with none: %+v", r)
	}
	for _, bad := range []string{`{"duration":"ten"}`, `{"duration":"forty eight hours"}`, `{}`, `{"duration":true}`} {
		if r := call(t, s, conv, SetName, bad); r.Outcome == tools.OutcomeOK {
			t.Errorf("set %s: %+v", bad, r)
		}
	}
	if r := call(t, s, nil, SetName, `{"duration":"1 minute"}`); r.Outcome != tools.OutcomeError {
		t.Errorf("a timer with no conversation: %+v", r)
	}
}

func TestTimerAcrossReconnect(t *testing.T) {
	clk := &fakeClock{}
	s := tools.NewSet(tools.Limits{}, Tools(clk.after))
	reg := tools.NewConversations(time.Hour, time.UTC, zerolog.Nop())
	conv := reg.Open("xiaozhi:aa")
	detach := conv.Attach(func(tools.Notice) bool { return true })
	call(t, s, conv, SetName, `{"duration":"one minute"}`)
	call(t, s, conv, SetName, `{"duration":"two minutes"}`)
	detach() // the device went away
	clk.fire(0)
	var heard []string
	reg.Open("xiaozhi:aa").Attach(func(n tools.Notice) bool { heard = append(heard, n.Text); return true })
	if len(heard) != 1 || heard[0] != "Your 1 minute timer is done." {
		t.Fatalf("after reconnect heard %q", heard)
	}
	conv.End() // the conversation is over: its other timer stops
	if !clk.timers[1].stopped {
		t.Fatal("ending the conversation left its timer running")
	}
}

func TestSpecsAreValidSchemas(t *testing.T) {
	for _, tl := range Tools(nil) {
		var v map[string]any
		if err := json.Unmarshal(tl.Spec().Parameters, &v); err != nil {
			t.Errorf("%s: %v", tl.Spec().Name, err)
		}
	}
}
