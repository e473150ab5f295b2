package openaiapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
)

// FuzzParseRequest: any body is refused with an error or gives a request
// within the limits, with known roles only; nothing panics.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"developer","content":[{"type":"text","text":"a"}]}],"stop":["x","y"],"max_tokens":5,"stream":true}`,
		`{"messages":[{"role":"tool","content":null}],"stop":"s","temperature":2.5}`,
		`{"model":"m","messages":[],"n":2,"top_p":0}`,
		`[1,2,3]`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}],` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
	} {
		f.Add(seed)
	}
	s := &server{modelID: "m", log: zerolog.Nop(), lim: Limits{MaxTokens: 100}.withDefaults()}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		_, req, allowed, apiErr := s.parseRequest(r)
		if apiErr != nil {
			if apiErr.status < 400 || apiErr.Message == "" {
				t.Fatalf("error %+v", apiErr)
			}
			return
		}
		if len(req.Messages) == 0 || len(req.Messages) > s.lim.MaxMessages || len(req.Stop) > MaxStops || req.MaxTokens > 100 {
			t.Fatalf("accepted %d messages, %d stops, max_tokens %d", len(req.Messages), len(req.Stop), req.MaxTokens)
		}
		for _, st := range req.Stop {
			if len(st) > MaxStopBytes {
				t.Fatalf("accepted a %d-byte stop", len(st))
			}
		}
		for _, m := range req.Messages {
			switch m.Role {
			case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool:
			default:
				t.Fatalf("accepted role %q", m.Role)
			}
		}
		if err := llm.ValidateToolMessages(req.Messages); err != nil {
			t.Fatalf("accepted tool messages: %v", err)
		}
		if len(req.Tools) > DefaultMaxTools {
			t.Fatalf("accepted %d tools", len(req.Tools))
		}
		for _, tool := range req.Tools {
			if !allowed[tool.Name] && req.ToolChoice != llm.ToolChoiceNone {
				t.Fatalf("tool %q offered but its calls would be dropped", tool.Name)
			}
		}
	})
}
