package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tools"
)

// BenchmarkCall is one tools/call round trip (echo) through the Manager:
// what an MCP tool adds to a turn beyond the tool's own work.
func BenchmarkCall(b *testing.B) {
	hs := newHTTPServer(b, "tok")
	for _, tc := range []struct {
		name string
		sc   ServerConfig
		tool string
	}{
		{"stdio", stdio("-tools", "echo"), "echo"},
		{"http", ServerConfig{Type: "http", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer tok"}}, "echo"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{"s": tc.sc}}, Options{}, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var tl tools.Tool
			for _, t := range m.Tools() {
				if t.Spec().Name == tc.tool {
					tl = t
				}
			}
			if tl == nil {
				b.Fatal("no echo tool")
			}
			args := tools.Call{Arguments: json.RawMessage(`{"text":"what time is it"}`)}
			b.ResetTimer()
			for b.Loop() {
				if _, err := tl.Call(context.Background(), args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
