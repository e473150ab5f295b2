package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// ToolError is a call the tool itself reported as failed (isError in the
// result); Error is the tool's own text.
type ToolError struct {
	Text string
}

func (e *ToolError) Error() string { return e.Text }

// tool is one tool of one server. It calls through whatever session the
// server has at the time, so a tool taken before a restart works after it.
type tool struct {
	s    *server
	real string // the server's name for it
	spec llm.Tool
}

var _ tools.Tool = (*tool)(nil)

func newTool(s *server, t *sdk.Tool, name string) *tool {
	spec := llm.Tool{Name: name, Description: t.Description}
	if t.InputSchema != nil {
		if raw, err := json.Marshal(t.InputSchema); err == nil && string(raw) != "null" {
			spec.Parameters = raw
		}
	}
	return &tool{s: s, real: t.Name, spec: spec}
}

func (t *tool) Spec() llm.Tool { return t.spec }

// Call runs tools/call on the server. The error wraps tools.ErrUnavailable
// when the server is down or its transport failed, the context's error
// when ctx (or CallTimeout) ran out, and is a *ToolError when the tool
// reported failure.
func (t *tool) Call(ctx context.Context, call tools.Call) (string, error) {
	cs := t.s.current()
	if cs == nil {
		return "", fmt.Errorf("mcp server %q is not connected: %w", t.s.name, tools.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, t.s.m.opts.CallTimeout)
	defer cancel()
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: t.real, Arguments: args})
	if err != nil {
		werr := answered(err)
		switch {
		case ctx.Err() != nil:
			return "", fmt.Errorf("mcp server %q, tool %s: %w", t.s.name, t.real, ctx.Err())
		case werr != nil:
			// The server answered with a protocol error (unknown tool,
			// invalid params): it is up, the call is wrong.
			return "", fmt.Errorf("mcp server %q, tool %s: %s", t.s.name, t.real, werr.Message)
		default:
			nudge(t.s.check)
			return "", fmt.Errorf("mcp server %q, tool %s: %w: %w", t.s.name, t.real, tools.ErrUnavailable, err)
		}
	}
	text := render(res, t.s.m.opts.MaxOutputBytes)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return "", &ToolError{Text: text}
	}
	return text, nil
}

// render is the text of a result for the model: text parts joined by
// newlines, other parts summarised, at most max bytes.
func render(res *sdk.CallToolResult, max int) string {
	var b strings.Builder
	total := 0 // the whole text's length; b stops growing past max
	part := func(s string) {
		if total > 0 {
			total++
			if b.Len() <= max {
				b.WriteByte('\n')
			}
		}
		total += len(s)
		if b.Len() <= max {
			b.WriteString(s[:min(len(s), max+1-b.Len())])
		}
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			part(c.Text)
		case *sdk.ImageContent:
			part(fmt.Sprintf("[image %s %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			part(fmt.Sprintf("[audio %s %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			part(fmt.Sprintf("[resource %s]", c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
				part("[resource]")
			case r.Text != "":
				part(r.Text)
			default:
				part(fmt.Sprintf("[resource %s %d bytes]", r.URI, len(r.Blob)))
			}
		default:
			part(fmt.Sprintf("[%T]", c))
		}
	}
	if total == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			part(string(raw))
		}
	}
	return clip(b.String(), total, max)
}

// clip cuts s, the start of a text of total bytes, to at most max bytes at
// a rune boundary, ending with a marker that says it was cut.
func clip(s string, total, max int) string {
	if total <= max {
		return s
	}
	marker := fmt.Sprintf("\n[truncated: the result was %d bytes]", total)
	keep := max - len(marker)
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	out := s[:keep] + marker
	if len(out) > max {
		out = out[:max]
	}
	return out
}
