package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestAgentNeedsTheLiveKitServer(t *testing.T) {
	t.Setenv("LIVEKIT_URL", "")
	t.Setenv("LIVEKIT_API_KEY", "")
	t.Setenv("LIVEKIT_API_SECRET", "")
	for _, args := range [][]string{
		{},
		{"--url", "ws://127.0.0.1:7880"},
		{"--url", "ws://127.0.0.1:7880", "--api-key", "k"},
		{"--url", "ws://127.0.0.1:7880", "--api-key", "k", "--drain", "soon"},
		{"extra"},
	} {
		err := runAgent(context.Background(), args)
		if !errors.Is(err, errCommandLine) {
			t.Errorf("agent %s: err %v, want a command-line error", strings.Join(args, " "), err)
		}
	}
}
