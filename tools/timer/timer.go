// Package timer is the built-in set_timer and cancel_timer tools. A timer
// belongs to its conversation (tools.Conversation): when it fires, the
// conversation's session speaks the reminder; a device that has gone away
// hears it when it reconnects, or it is dropped with a log line when the
// conversation ends.
package timer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// Tool names.
const (
	SetName    = "set_timer"
	CancelName = "cancel_timer"
)

// Bounds of one timer.
const (
	MaxDuration = 24 * time.Hour
	// maxTimers bounds the timers of one conversation.
	maxTimers = 16
)

// Tools returns the two tools, sharing afterFunc (nil: time.AfterFunc;
// tests pass a fake clock).
func Tools(afterFunc func(time.Duration, func()) Stopper) tools.Static {
	if afterFunc == nil {
		afterFunc = func(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }
	}
	k := &kit{after: afterFunc}
	return tools.Static{setTool{k}, cancelTool{k}}
}

// Stopper is a running timer (time.Timer's Stop).
type Stopper interface{ Stop() bool }

type kit struct {
	after func(time.Duration, func()) Stopper
}

// timers are one conversation's.
type timers struct {
	mu   sync.Mutex
	seq  int
	list []*running
}

type running struct {
	id    int
	label string
	d     time.Duration
	due   time.Time
	stop  Stopper
}

type stateKey struct{}

func (k *kit) of(conv *tools.Conversation) *timers {
	return conv.Value(stateKey{}, func() any {
		ts := &timers{}
		conv.OnEnd(ts.stopAll)
		return ts
	}).(*timers)
}

func (ts *timers) stopAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, r := range ts.list {
		r.stop.Stop()
	}
	ts.list = nil
}

// remove drops r; it reports whether r was still running.
func (ts *timers) remove(r *running) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i, x := range ts.list {
		if x == r {
			ts.list = append(ts.list[:i], ts.list[i+1:]...)
			return true
		}
	}
	return false
}

var errNoConversation = errors.New("timers need a voice conversation to ring in")

type setTool struct{ k *kit }

func (setTool) Spec() llm.Tool {
	return llm.Tool{
		Name:        SetName,
		Description: "Start a countdown timer; when it ends the assistant says so.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"duration":{"type":["string","number"],"description":"how long, as the person said it (or a number of seconds), e.g. \"ten minutes\", \"90 seconds\", \"an hour and a half\""},` +
			`"label":{"type":"string","description":"what the timer is for, if the person said (e.g. \"pasta\")"}},` +
			`"required":["duration"]}`),
	}
}

type setArgs struct {
	Duration json.RawMessage `json:"duration"`
	Label    string          `json:"label"`
}

func (t setTool) Call(_ context.Context, c tools.Call) (string, error) {
	if c.Conversation == nil {
		return "", errNoConversation
	}
	var a setArgs
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		return "", err
	}
	d, err := durationArg(a.Duration)
	if err != nil {
		return "", err
	}
	if d < time.Second || d > MaxDuration {
		return "", fmt.Errorf("a timer runs from one second to %s, not %s", Words(MaxDuration), Words(d))
	}
	label := strings.TrimSpace(a.Label)
	ts := t.k.of(c.Conversation)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.list) >= maxTimers {
		return "", fmt.Errorf("there are already %d timers running", len(ts.list))
	}
	ts.seq++
	r := &running{id: ts.seq, label: label, d: d, due: time.Now().Add(d)}
	conv := c.Conversation
	r.stop = t.k.after(d, func() {
		if ts.remove(r) {
			conv.Announce(tools.Notice{Text: ringText(r), From: SetName})
		}
	})
	ts.list = append(ts.list, r)
	return "Timer set for " + name(r) + ".", nil
}

// durationArg takes "ten minutes" or a number of seconds (models that
// prefer numbers write one).
func durationArg(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseDuration(s)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil && f > 0 && !math.IsInf(f, 0) {
		return time.Duration(f * float64(time.Second)), nil
	}
	return 0, errors.New(`duration must be a string such as "ten minutes"`)
}

func name(r *running) string {
	n := Words(r.d)
	if r.label != "" {
		n += " " + r.label
	}
	return n
}

func ringText(r *running) string {
	if r.label != "" {
		return fmt.Sprintf("Your %s timer for %s is done.", Words(r.d), r.label)
	}
	return fmt.Sprintf("Your %s timer is done.", Words(r.d))
}

// Words says d as a person would: "25 minutes", "1 hour 30 minutes", "90
// seconds" stays "1 minute 30 seconds".
func Words(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var parts []string
	add := func(n int, unit string) {
		if n == 0 {
			return
		}
		if n != 1 {
			unit += "s"
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, unit))
	}
	add(h, "hour")
	add(m, "minute")
	add(s, "second")
	if len(parts) == 0 {
		return "0 seconds"
	}
	return strings.Join(parts, " ")
}

type cancelTool struct{ k *kit }

func (cancelTool) Spec() llm.Tool {
	return llm.Tool{
		Name:        CancelName,
		Description: "Cancel a running timer (the latest one, or the one with the given label).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","description":"the timer's label, if the person named one"}}}`),
	}
}

func (t cancelTool) Call(_ context.Context, c tools.Call) (string, error) {
	if c.Conversation == nil {
		return "", errNoConversation
	}
	var a struct {
		Label string `json:"label"`
	}
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		return "", err
	}
	ts := t.k.of(c.Conversation)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.list) == 0 {
		return "There is no timer running.", nil
	}
	pick := len(ts.list) - 1
	if l := strings.ToLower(strings.TrimSpace(a.Label)); l != "" {
		pick = -1
		for i, r := range ts.list {
			if strings.Contains(strings.ToLower(r.label), l) {
				pick = i
			}
		}
		if pick < 0 {
			return fmt.Sprintf("There is no %s timer; %d other timer(s) still run.", a.Label, len(ts.list)), nil
		}
	}
	r := ts.list[pick]
	r.stop.Stop()
	ts.list = append(ts.list[:pick], ts.list[pick+1:]...)
	left := time.Until(r.due).Round(time.Second)
	return fmt.Sprintf("Cancelled the %s timer (%s were left).", name(r), Words(max(0, left))), nil
}
