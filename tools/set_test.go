package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
)

type fnTool struct {
	spec llm.Tool
	fn   func(ctx context.Context, c Call) (string, error)
}

func (f fnTool) Spec() llm.Tool                                   { return f.spec }
func (f fnTool) Call(ctx context.Context, c Call) (string, error) { return f.fn(ctx, c) }

var volumeSchema = json.RawMessage(`{"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]}`)

func TestSetRun(t *testing.T) {
	var got json.RawMessage
	volume := fnTool{llm.Tool{Name: "self.audio_speaker.set_volume", Parameters: volumeSchema}, func(_ context.Context, c Call) (string, error) {
		got = c.Arguments
		return "true", nil
	}}
	slow := fnTool{llm.Tool{Name: "slow"}, func(ctx context.Context, _ Call) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	failing := fnTool{llm.Tool{Name: "fail"}, func(context.Context, Call) (string, error) { return "", errors.New("disk on fire") }}
	big := fnTool{llm.Tool{Name: "big"}, func(context.Context, Call) (string, error) { return strings.Repeat("é", 5000), nil }}
	s := NewSet(Limits{CallTimeout: 50 * time.Millisecond, MaxResultBytes: 100}, Static{volume, slow, failing, big}, Static{fnTool{llm.Tool{Name: "slow"}, nil}})
	if s.Len() != 4 {
		t.Fatalf("Len = %d, want 4 (the second slow is a duplicate)", s.Len())
	}
	if s.Specs()[0].Name != "self_audio_speaker_set_volume" {
		t.Fatalf("model name %q", s.Specs()[0].Name)
	}
	if string(s.Specs()[1].Parameters) != `{"type":"object","properties":{}}` {
		t.Fatalf("a tool without a schema gets an empty object's: %s", s.Specs()[1].Parameters)
	}
	calls := []llm.ToolCall{
		{ID: "1", Name: "self_audio_speaker_set_volume", Arguments: `{"volume": 30}`},
		{ID: "2", Name: "self_audio_speaker_set_volume", Arguments: `{"volume": 300}`},
		{ID: "3", Name: "self_audio_speaker_set_volume", Arguments: `{"volume": "loud"`},
		{ID: "4", Name: "launch_missiles", Arguments: `{}`},
		{ID: "5", Name: "slow"},
		{ID: "6", Name: "fail"},
		{ID: "7", Name: "big", Arguments: `[]`},
		{ID: "8", Name: "big"},
	}
	res := s.Run(context.Background(), nil, calls)
	want := []string{OutcomeOK, OutcomeBadArgs, OutcomeBadArgs, OutcomeUnknown, OutcomeTimeout, OutcomeError, OutcomeBadArgs, OutcomeOK}
	for i, r := range res {
		if r.Outcome != want[i] {
			t.Errorf("call %s: outcome %s (%v), want %s", r.Call.ID, r.Outcome, r.Err, want[i])
		}
		if r.Message().ToolCallID != calls[i].ID || r.Message().Role != llm.RoleTool {
			t.Errorf("call %s: message %+v", r.Call.ID, r.Message())
		}
	}
	if string(got) != `{"volume": 30}` || res[0].Content != "true" || res[0].Tool != "self.audio_speaker.set_volume" {
		t.Errorf("set_volume got %s, result %+v", got, res[0])
	}
	if !strings.Contains(res[3].Content, "no tool named") || !strings.Contains(res[3].Content, "self_audio_speaker_set_volume") {
		t.Errorf("unknown tool result %q should name the tools there are", res[3].Content)
	}
	if len(res[7].Content) > 100 || !strings.HasSuffix(res[7].Content, "[truncated]") {
		t.Errorf("big result not clipped: %d bytes", len(res[7].Content))
	}
	if !strings.Contains(res[4].Content, "within 50ms") {
		t.Errorf("timeout result %q should name the set's 50ms limit", res[4].Content)
	}
}

// TestSetTimeoutNamesLimit: a tool whose own limit fires before the set's
// (a device's MCP timeout) times out with its own words, not the set's
// limit.
func TestSetTimeoutNamesLimit(t *testing.T) {
	device := fnTool{llm.Tool{Name: "self.audio_speaker.set_volume"}, func(context.Context, Call) (string, error) {
		return "", fmt.Errorf("mcp tools/call: device did not answer in time: %w (5s)", context.DeadlineExceeded)
	}}
	s := NewSet(Limits{CallTimeout: time.Minute}, Static{device})
	r := s.Run(context.Background(), nil, []llm.ToolCall{{ID: "1", Name: "self_audio_speaker_set_volume"}})[0]
	if r.Outcome != OutcomeTimeout || !strings.Contains(r.Content, "(5s)") || strings.Contains(r.Content, "1m0s") {
		t.Errorf("outcome %s, result %q: want a timeout naming the device's 5s, not the set's minute", r.Outcome, r.Content)
	}
}

func TestSetCancelled(t *testing.T) {
	started := make(chan struct{})
	slow := fnTool{llm.Tool{Name: "slow"}, func(ctx context.Context, _ Call) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	s := NewSet(Limits{CallTimeout: time.Minute}, Static{slow})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	r := s.Run(ctx, nil, []llm.ToolCall{{ID: "a", Name: "slow"}})[0]
	if r.Outcome != OutcomeCancelled {
		t.Fatalf("outcome %s", r.Outcome)
	}
}

func TestModelName(t *testing.T) {
	for in, want := range map[string]string{
		"get_time":                      "get_time",
		"self.audio_speaker.set_volume": "self_audio_speaker_set_volume",
		strings.Repeat("x", 70):         strings.Repeat("x", 64),
		"añb":                           "a__b",
	} {
		if got := ModelName(in); got != want {
			t.Errorf("ModelName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConversationNotices(t *testing.T) {
	reg := NewConversations(30*time.Millisecond, time.UTC, zerolog.Nop())
	c := reg.Open("dev-1")
	if reg.Open("dev-1") != c {
		t.Fatal("Open of a live key returns another conversation")
	}
	var got []string
	deliver := func(n Notice) bool { got = append(got, n.Text); return true }
	detach := c.Attach(deliver)
	c.Announce(Notice{Text: "one"})
	detach()
	c.Announce(Notice{Text: "two"}) // held: nobody attached
	if len(got) != 1 {
		t.Fatalf("delivered %v", got)
	}
	detach2 := c.Attach(deliver)
	detach() // a stale detach changes nothing
	c.Announce(Notice{Text: "three"})
	if strings.Join(got, ",") != "one,two,three" {
		t.Fatalf("delivered %v", got)
	}
	ended := make(chan struct{})
	c.OnEnd(func() { close(ended) })
	detach2()
	select {
	case <-ended: // no session within the hold: the conversation ends
	case <-time.After(5 * time.Second):
		t.Fatal("conversation did not end after its hold")
	}
	if c.Announce(Notice{Text: "late"}) || reg.Len() != 0 {
		t.Fatal("an ended conversation kept a notice or stayed registered")
	}
	if reg.Open("dev-1") == c {
		t.Fatal("an ended conversation was reopened")
	}
}

func TestConversationRefusedDelivery(t *testing.T) {
	c := NewConversation("x", nil, zerolog.Nop())
	full := true
	var got []string
	c.Attach(func(n Notice) bool {
		if full {
			return false
		}
		got = append(got, n.Text)
		return true
	})
	for i := range maxPendingNotices + 2 {
		c.Announce(Notice{Text: string(rune('a' + i))})
	}
	full = false
	c.Attach(func(n Notice) bool { got = append(got, n.Text); return true })
	if len(got) != maxPendingNotices {
		t.Fatalf("held %d notices, want the bound %d", len(got), maxPendingNotices)
	}
}
