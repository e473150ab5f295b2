package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/voxpipe/voxpipe/llm"
)

// Limits of a Set.
type Limits struct {
	// CallTimeout bounds one call; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxResultBytes bounds the text a call gives back to the model (an MCP
	// server's output can be anything); 0 means DefaultMaxResultBytes.
	MaxResultBytes int
}

// Defaults of Limits.
const (
	DefaultCallTimeout    = 10 * time.Second
	DefaultMaxResultBytes = 8 << 10
)

// maxArgumentBytes bounds the arguments a model may pass: a model that
// loops inside a JSON string is cut here rather than parsed.
const maxArgumentBytes = 64 << 10

// namePattern is the function-name rule of the OpenAI API (and Ark's):
// names that break it are rewritten before a model sees them.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Set is the tools of one turn, under the names the model sees. Build it
// with NewSet; it is safe for concurrent use and does not change.
type Set struct {
	limits Limits
	specs  []llm.Tool // the model's view, in order
	byName map[string]*entry
}

type entry struct {
	tool   Tool
	real   string               // the tool's own name (Spec().Name)
	schema *jsonschema.Resolved // nil: any object
	bad    error                // the tool's schema does not resolve: every call fails with it
}

// NewSet gathers the tools of providers (in order; a later tool whose
// model-facing name is taken is dropped, so put the providers that should
// win first). Names that break the OpenAI rule have every other character
// replaced by '_' ("self.audio_speaker.set_volume" is offered as
// "self_audio_speaker_set_volume") and are cut to 64 bytes.
func NewSet(limits Limits, providers ...Provider) *Set {
	if limits.CallTimeout <= 0 {
		limits.CallTimeout = DefaultCallTimeout
	}
	if limits.MaxResultBytes <= 0 {
		limits.MaxResultBytes = DefaultMaxResultBytes
	}
	s := &Set{limits: limits, byName: map[string]*entry{}}
	for _, p := range providers {
		if p == nil {
			continue
		}
		for _, t := range p.Tools() {
			spec := t.Spec()
			name := ModelName(spec.Name)
			if name == "" || s.byName[name] != nil {
				continue
			}
			e := &entry{tool: t, real: spec.Name}
			e.schema, e.bad = resolveSchema(spec.Parameters)
			s.byName[name] = e
			spec.Name = name
			if len(spec.Parameters) == 0 {
				spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			s.specs = append(s.specs, spec)
		}
	}
	return s
}

// ModelName is name as a model may see it: characters outside
// [a-zA-Z0-9_-] become '_', at most 64 bytes.
func ModelName(name string) string {
	if namePattern.MatchString(name) {
		return name
	}
	b := []byte(name)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, fmt.Errorf("the tool's input schema is not valid JSON Schema: %w", err)
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the tool's input schema does not resolve: %w", err)
	}
	return rs, nil
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.specs)
}

// Specs are the tools as the model sees them, for llm.Request.Tools; nil
// for an empty set.
func (s *Set) Specs() []llm.Tool {
	if s.Len() == 0 {
		return nil
	}
	return s.specs
}

// Run makes the calls, concurrently (a model asks for several at once when
// they do not depend on each other), and returns one Result per call in
// the calls' order. It never fails: every problem is a Result the model can
// read. Cancelling ctx ends the calls still running (OutcomeCancelled).
func (s *Set) Run(ctx context.Context, conv *Conversation, calls []llm.ToolCall) []Result {
	out := make([]Result, len(calls))
	if len(calls) == 1 {
		out[0] = s.call(ctx, conv, calls[0])
		return out
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { out[i] = s.call(ctx, conv, c) })
	}
	wg.Wait()
	return out
}

func (s *Set) call(ctx context.Context, conv *Conversation, c llm.ToolCall) Result {
	r := Result{Call: c}
	var e *entry
	if s != nil {
		e = s.byName[c.Name]
	}
	if e == nil {
		return r.fail(OutcomeUnknown, fmt.Errorf("there is no tool named %q; the tools are: %s", c.Name, s.names()))
	}
	r.Tool = e.real
	if e.bad != nil {
		return r.fail(OutcomeError, e.bad)
	}
	args, err := e.arguments(c.Arguments)
	if err != nil {
		return r.fail(OutcomeBadArgs, fmt.Errorf("bad arguments for %s: %w", c.Name, err))
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, s.limits.CallTimeout)
	defer cancel()
	text, err := e.tool.Call(cctx, Call{Arguments: args, Conversation: conv})
	r.Duration = time.Since(start)
	switch {
	case ctx.Err() != nil:
		return r.fail(OutcomeCancelled, fmt.Errorf("%s was cancelled", c.Name))
	case err == nil:
		r.Outcome, r.Content = OutcomeOK, s.clip(text)
		return r
	case cctx.Err() != nil:
		return r.fail(OutcomeTimeout, fmt.Errorf("%s did not answer within %s", c.Name, s.limits.CallTimeout))
	case errors.Is(err, context.DeadlineExceeded):
		// The tool's own, shorter limit fired (a device's MCP timeout, an
		// MCP server's call timeout): its error names that limit.
		return r.fail(OutcomeTimeout, fmt.Errorf("%s timed out: %w", c.Name, err))
	default:
		return r.fail(OutcomeError, fmt.Errorf("%s failed: %w", c.Name, err))
	}
}

// arguments parses and validates a call's arguments: "" is an empty object.
func (e *entry) arguments(text string) (json.RawMessage, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		text = "{}"
	}
	if len(text) > maxArgumentBytes {
		return nil, fmt.Errorf("arguments of %d bytes (at most %d)", len(text), maxArgumentBytes)
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	if e.schema != nil {
		if err := e.schema.Validate(v); err != nil {
			return nil, err
		}
	}
	return json.RawMessage(text), nil
}

func (r Result) fail(outcome string, err error) Result {
	r.Outcome, r.Err = outcome, err
	r.Content = "error: " + err.Error()
	return r
}

// clip bounds a result's text, on a rune boundary, saying that it did.
func (s *Set) clip(text string) string {
	limit := s.limits.MaxResultBytes
	if len(text) <= limit {
		return text
	}
	const mark = " …[truncated]"
	cut := max(0, limit-len(mark))
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + mark
}

func (s *Set) names() string {
	if s.Len() == 0 {
		return "none"
	}
	names := make([]string, len(s.specs))
	for i, t := range s.specs {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// Start is Run on a goroutine of its own, for a caller that has other
// things to do while the calls run (say a filler): the channel gets the
// results and is closed.
func (s *Set) Start(ctx context.Context, conv *Conversation, calls []llm.ToolCall) <-chan []Result {
	ch := make(chan []Result, 1)
	go func() {
		defer close(ch)
		ch <- s.Run(ctx, conv, calls)
	}()
	return ch
}
