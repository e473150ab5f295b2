// Package ark is an llm.Model on Volcengine Ark (Doubao models), through
// the official SDK's runtime client (volcengine-go-sdk service/arkruntime).
// Answers stream over Ark's OpenAI-style chat completions; the wire facts
// the code relies on are in ../shared/docs/volcengine-protocols.md, section 1.
//
// Function calling goes through the SDK's model types: llm.Request.Tools
// become "tools" (type "function"), ToolChoice "tool_choice", and history
// carries assistant tool_calls and "tool" messages. Streamed
// delta.tool_calls are assembled per index (llm/openai/toolcall: Ark's
// stream is OpenAI's shape) and each call is passed on whole in
// llm.Token.ToolCalls once its arguments are complete, at the latest on the
// Done token.
package ark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/volcengine/volcengine-go-sdk/service/arkruntime"
	"github.com/volcengine/volcengine-go-sdk/service/arkruntime/model"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openai/toolcall"
)

// KeyEnv is the environment variable the API key is read from.
const KeyEnv = "ARK_API_KEY"

// DefaultBaseURL is Ark's Beijing endpoint (the SDK's default).
const DefaultBaseURL = "https://ark.cn-beijing.volces.com/api/v3"

// Config configures the client.
type Config struct {
	Model   string // endpoint id (ep-...) or model name
	BaseURL string // "" = DefaultBaseURL; tests point it at a fake
	APIKey  string // from KeyEnv; required
	// Retries is how many times opening the stream is retried (5xx, 429,
	// transport errors; the SDK's own back-off). Never mid-answer.
	Retries int
	// TimeoutFirstToken bounds the wait for the first chunk, TimeoutIdle
	// the gap between chunks; 0 = none.
	TimeoutFirstToken time.Duration
	TimeoutIdle       time.Duration
	HTTPClient        *http.Client // nil = a default client without an overall timeout
}

// Client streams answers from Ark. It is safe for concurrent use.
type Client struct {
	cfg Config
	c   *arkruntime.Client
}

// ErrNoKey is returned by New without an API key.
var ErrNoKey = errors.New("ark: no API key (set " + KeyEnv + ")")

// New builds a client; it does not contact the service.
func New(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, ErrNoKey
	}
	if cfg.Model == "" {
		return nil, errors.New("ark: no model (endpoint id)")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// The SDK's default client has a 10-minute Timeout over the whole
		// stream; voxpipe bounds first token and idle gaps instead.
		hc = &http.Client{}
	}
	c := arkruntime.NewClientWithApiKey(cfg.APIKey,
		arkruntime.WithBaseUrl(cfg.BaseURL),
		arkruntime.WithHTTPClient(hc),
		arkruntime.WithRetryTimes(cfg.Retries))
	return &Client{cfg: cfg, c: c}, nil
}

// request builds the SDK's request; its error (malformed tools or tool
// messages) wraps llm.ErrInvalid.
func (c *Client) request(req llm.Request) (model.CreateChatCompletionRequest, error) {
	if err := toolcall.CheckRequest(req); err != nil {
		return model.CreateChatCompletionRequest{}, fmt.Errorf("ark: %w", err)
	}
	msgs := make([]*model.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		content := m.Content
		msg := &model.ChatCompletionMessage{Role: m.Role, Content: &model.ChatCompletionMessageContent{StringValue: &content}, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 && content == "" {
			msg.Content = nil // null, as Ark answers a call without text
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, &model.ToolCall{ID: tc.ID, Type: model.ToolTypeFunction, Function: model.FunctionCall{Name: tc.Name, Arguments: args}})
		}
		msgs[i] = msg
	}
	r := model.CreateChatCompletionRequest{
		Model:         c.cfg.Model,
		Messages:      msgs,
		StreamOptions: &model.StreamOptions{IncludeUsage: true},
		// A voice answer must not wait for a reasoning model to think.
		Thinking: &model.Thinking{Type: model.ThinkingTypeDisabled},
		Stop:     req.Stop,
	}
	if req.MaxTokens > 0 {
		r.MaxTokens = &req.MaxTokens
	}
	t := req.Temperature
	r.Temperature = &t // 0 is sent: greedy
	if req.TopP > 0 {
		r.TopP = &req.TopP
	}
	for _, t := range req.Tools {
		params, _ := toolcall.Parameters(t) // checked above
		r.Tools = append(r.Tools, &model.Tool{Type: model.ToolTypeFunction, Function: &model.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: json.RawMessage(params)}})
	}
	if len(r.Tools) > 0 && req.ToolChoice != llm.ToolChoiceAuto {
		r.ToolChoice = req.ToolChoice // "none" or "required", Ark's strings too
	}
	return r, nil
}

// Stream implements llm.Model. A request with malformed tools fails at
// once (llm.ErrInvalid); opening the stream happens in the background, and
// its failure arrives as the first Token's Err.
func (c *Client) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	r, err := c.request(req)
	if err != nil {
		return nil, err
	}
	out := make(chan llm.Token, 16)
	go c.run(ctx, r, out)
	return out, nil
}

// errTimeout is the cancel cause of a request whose server went quiet.
type errTimeout struct{ what string }

func (e errTimeout) Error() string { return "ark: timed out waiting for the " + e.what }

func (c *Client) run(ctx context.Context, req model.CreateChatCompletionRequest, out chan<- llm.Token) {
	defer close(out)
	send := func(t llm.Token) bool {
		select {
		case out <- t:
			return true
		case <-ctx.Done():
			return false
		}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A watchdog cancels the request when the server is silent too long:
	// first for the first chunk, then between chunks.
	wait := func(d time.Duration, what string) *time.Timer {
		if d <= 0 {
			return nil
		}
		return time.AfterFunc(d, func() { cancel(errTimeout{what}) })
	}
	watch := wait(c.cfg.TimeoutFirstToken, "first token")
	stopWatch := func() {
		if watch != nil {
			watch.Stop()
		}
	}
	defer stopWatch()
	fail := func(err error) {
		if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
			err = cause
		}
		if ctx.Err() == nil {
			send(llm.Token{Err: describe(err)})
		}
	}
	// Ark reports no timings, so the TTFT split is the client's own:
	// connecting and sending (the last attempt's), then the server's part.
	var start, wrote atomic.Int64
	trace := &httptrace.ClientTrace{
		GetConn:      func(string) { start.Store(time.Now().UnixNano()) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(time.Now().UnixNano()) },
	}
	stream, err := c.c.CreateChatCompletionStream(httptrace.WithClientTrace(rctx, trace), req)
	if err != nil {
		fail(err)
		return
	}
	defer stream.Close()
	// Close the body at once on cancel: a blocked Recv returns then.
	stopClose := context.AfterFunc(rctx, func() { _ = stream.Close() })
	defer stopClose()
	var usage *llm.Usage
	first := true
	var firstAt int64
	var calls toolcall.Assembler
	malformed := func(err error) { fail(fmt.Errorf("ark: malformed tool call in the answer: %w", err)) }
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if !stream.IsFinished {
				fail(errors.New("ark: connection closed before [DONE]"))
				return
			}
			rest, err := calls.Finish() // calls of an answer without finish_reason
			if err != nil {
				malformed(err)
				return
			}
			if usage == nil {
				usage = &llm.Usage{}
			}
			if s, w := start.Load(), wrote.Load(); s != 0 && w >= s && firstAt >= w {
				usage.TTFTNetwork, usage.TTFTServer = time.Duration(w-s), time.Duration(firstAt-w)
			}
			send(llm.Token{Done: true, Usage: usage, ToolCalls: rest})
			// The body's end, so the connection goes back to the pool.
			if stream.Response != nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(stream.Response.Body, 64<<10))
			}
			return
		}
		if err != nil {
			fail(err)
			return
		}
		if !first {
			stopWatch() // a wait for the reader below is not the server's idleness
		}
		if resp.Usage != nil {
			usage = &llm.Usage{
				PromptTokens:     resp.Usage.PromptTokens,
				CompletionTokens: resp.Usage.CompletionTokens,
				CachedTokens:     resp.Usage.PromptTokensDetails.CachedTokens,
			}
		}
		for _, ch := range resp.Choices { // the usage chunk has none
			if ch == nil || ch.Index != 0 {
				continue
			}
			for _, d := range ch.Delta.ToolCalls {
				if d == nil {
					continue
				}
				if err := calls.Add(toolcall.Delta{Index: d.Index, ID: d.ID, Type: string(d.Type), Name: d.Function.Name, Arguments: d.Function.Arguments}); err != nil {
					malformed(err)
					return
				}
			}
			var ready []llm.ToolCall
			if ch.FinishReason != "" {
				rest, err := calls.Finish()
				if err != nil {
					malformed(err)
					return
				}
				ready = append(calls.Ready(), rest...)
			} else if len(ch.Delta.ToolCalls) > 0 {
				ready = calls.Ready()
			}
			if ch.Delta.Content == "" && len(ch.Delta.ToolCalls) == 0 && len(ready) == 0 {
				continue
			}
			// An argument delta is a token for the watch, though the
			// call is passed on only when whole.
			if first {
				first = false
				firstAt = time.Now().UnixNano()
				stopWatch()
				watch = nil
			}
			if ch.Delta.Content == "" && len(ready) == 0 {
				continue
			}
			if !send(llm.Token{Text: ch.Delta.Content, ToolCalls: ready}) {
				return
			}
		}
		if !first {
			stopWatch()
			watch = wait(c.cfg.TimeoutIdle, "next token")
		}
	}
}

// describe turns the SDK's errors into one line that names Ark, the HTTP
// status and the server's code; 429 wraps llm.ErrBusy.
func describe(err error) error {
	var te errTimeout
	if errors.As(err, &te) {
		return te
	}
	var apiErr *model.APIError
	if errors.As(err, &apiErr) {
		msg := "ark: "
		if apiErr.HTTPStatusCode != 0 {
			msg += "HTTP " + strconv.Itoa(apiErr.HTTPStatusCode) + ": "
		} else {
			msg += "error in stream: "
		}
		msg += apiErr.Code
		if apiErr.Message != "" {
			msg += ": " + apiErr.Message
		}
		if apiErr.RequestId != "" {
			msg += " (request " + apiErr.RequestId + ")"
		}
		if apiErr.HTTPStatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("%s: %w", msg, llm.ErrBusy)
		}
		return errors.New(msg)
	}
	var reqErr *model.RequestError
	if errors.As(err, &reqErr) {
		if reqErr.HTTPStatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("ark: HTTP 429: %w", llm.ErrBusy)
		}
		return fmt.Errorf("ark: HTTP %d: %w", reqErr.HTTPStatusCode, reqErr.Err)
	}
	if strings.HasPrefix(err.Error(), "ark: ") {
		return err
	}
	return fmt.Errorf("ark: %w", err)
}
