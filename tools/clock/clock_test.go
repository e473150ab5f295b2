package clock

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tools"
)

func TestTimeInTheConversationsZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skipf("time zone data unavailable: %v", err)
	}
	at := time.Date(2026, 12, 7, 21, 14, 0, 0, time.UTC)
	tl := &Tool{Now: func() time.Time { return at }, Location: time.UTC}
	got, err := tl.Call(context.Background(), tools.Call{})
	if err != nil || got != "It is 9:14 PM on Monday, 7 December 2026 (UTC)." {
		t.Fatalf("UTC: %q, %v", got, err)
	}
	conv := tools.NewConversation("k", tokyo, zerolog.Nop())
	got, _ = tl.Call(context.Background(), tools.Call{Conversation: conv})
	if got != "It is 6:14 AM on Tuesday, 8 December 2026 (Asia/Tokyo)." {
		t.Fatalf("Tokyo: %q", got)
	}
}
