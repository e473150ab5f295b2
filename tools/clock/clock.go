// Package clock is the built-in get_time tool: the real time and date in
// the conversation's time zone, in words a TTS reads well.
package clock

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// Name is the tool's name.
const Name = "get_time"

// Tool tells the time. Now is the clock (nil: time.Now); Location the zone
// used when the call has no conversation.
type Tool struct {
	Now      func() time.Time
	Location *time.Location
}

// New returns the tool for loc (nil: the server's local zone).
func New(loc *time.Location) *Tool { return &Tool{Location: loc} }

// Spec implements tools.Tool.
func (t *Tool) Spec() llm.Tool {
	return llm.Tool{
		Name:        Name,
		Description: "Get the current local time and date.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	}
}

// Call implements tools.Tool.
func (t *Tool) Call(_ context.Context, c tools.Call) (string, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	loc := t.Location
	if c.Conversation != nil && c.Conversation.Location() != nil {
		loc = c.Conversation.Location()
	}
	if loc == nil {
		loc = time.Local
	}
	return Say(now().In(loc)), nil
}

// Say puts tm into the words of the tool's result: "It is 9:14 PM on
// Monday, 7 December 2026 (UTC)."
func Say(tm time.Time) string {
	zone, _ := tm.Zone()
	if name := tm.Location().String(); name != "Local" && name != "" && name != zone {
		zone = name
	}
	return fmt.Sprintf("It is %s on %s (%s).", tm.Format("3:04 PM"), tm.Format("Monday, 2 January 2006"), zone)
}
