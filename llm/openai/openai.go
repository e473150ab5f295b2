// Package openai is an llm.Model on any OpenAI-compatible chat completions
// server: vLLM, TensorRT-LLM's trtllm-serve, Triton's OpenAI front end,
// llama.cpp's llama-server, Ollama, or another voxpipe's /v1.
//
// Answers stream over server-sent events (data: lines, [DONE], the usage
// chunk of stream_options.include_usage); a server that answers with one
// JSON body instead (or Config.NoStream) is read whole. A request is retried
// with back-off only while no token has been passed on; after that a fault
// ends the answer with an error. HTTP 429 wraps llm.ErrBusy and, for the
// time its Retry-After says, later requests fail fast without calling the
// server. Cancelling the context closes the HTTP stream at once.
//
// A request's llm.Request.Conversation (the voice session's id) goes in
// the X-Voxpipe-Conversation header, so a server that keeps per-
// conversation state (voxpipe's /v1) keeps each session's KV cache apart;
// other servers ignore the header.
//
// Tools: llm.Request.Tools go out as OpenAI's "tools" (type "function") and
// ToolChoice as "tool_choice"; history carries assistant "tool_calls" and
// "tool" messages. Streamed "delta.tool_calls" are assembled per index
// (package toolcall) and each call is passed on whole in llm.Token.ToolCalls
// as soon as its arguments form a complete JSON object, and at the latest
// on the Done token; text before a call streams at once.
package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openai/toolcall"
)

// conversationHeader carries llm.Request.Conversation (voxpipe's /v1 reads
// it: llm/openaiapi.ConversationHeader).
const conversationHeader = "X-Voxpipe-Conversation"

// DefaultKeyEnv is the environment variable the API key is read from.
const DefaultKeyEnv = "OPENAI_API_KEY"

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, ending in /v1 for most servers
	// (http://127.0.0.1:8000/v1); /chat/completions is appended.
	BaseURL string
	Model   string // the "model" field; "" is sent as is (llama-server ignores it)
	// APIKey is sent as "Authorization: Bearer" when set; self-hosted
	// servers often need none.
	APIKey  string
	Headers map[string]string // extra request headers
	// TimeoutConnect bounds dialing the server, TimeoutFirstToken the wait
	// for the first token (all attempts together), TimeoutIdle the gap
	// between two events of a stream. 0 = no limit.
	TimeoutConnect    time.Duration
	TimeoutFirstToken time.Duration
	TimeoutIdle       time.Duration
	// Retries is how many more attempts a failure before the first token
	// gets (connection refused or dropped, HTTP 5xx). 4xx is never retried.
	Retries int
	// NoStream asks for one JSON answer instead of a stream.
	NoStream bool
	// Prefill makes New return a model that implements llm.Prefiller: an
	// early-start prefill is a one-token request, so a server with a prompt
	// cache (llama-server, vLLM's prefix caching, voxpipe) has the prompt
	// ready when the real request comes.
	Prefill bool
	// HTTPClient replaces the default client (its Transport is used as is).
	HTTPClient *http.Client
}

// Client streams answers from one server. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	where    string // host:port, for messages (never the key or a userinfo)
	hc       *http.Client
	// busyUntil is the Unix nanosecond until which the server asked us to
	// stay away (Retry-After of a 429).
	busyUntil atomic.Int64
}

// New returns a model for cfg. With cfg.Prefill it also implements
// llm.Prefiller.
func New(cfg Config) (llm.Model, error) {
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Prefill {
		return &prefilling{c}, nil
	}
	return c, nil
}

// NewClient is New without the Prefiller wrapper.
func NewClient(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base_url %q: want http(s)://host[:port]/path", cfg.BaseURL)
	}
	if cfg.Retries < 0 {
		cfg.Retries = 0
	}
	c := &Client{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions", where: u.Host, hc: cfg.HTTPClient}
	if c.hc == nil {
		d := &net.Dialer{Timeout: cfg.TimeoutConnect, KeepAlive: 30 * time.Second}
		c.hc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: 64, // one per concurrent voice session, kept warm
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}}
	}
	return c, nil
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// Error is a failure of one request. It names the backend and the server;
// Busy errors match llm.ErrBusy.
type Error struct {
	Where      string        // host:port
	Status     int           // HTTP status; 0 for a transport or stream fault
	Message    string        // the server's message, or what went wrong
	RetryAfter time.Duration // from a 429's Retry-After
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("openai: %s: HTTP %d: %s", e.Where, e.Status, e.Message)
	}
	return fmt.Sprintf("openai: %s: %s", e.Where, e.Message)
}

// Is makes a 429 match llm.ErrBusy.
func (e *Error) Is(target error) bool {
	return target == llm.ErrBusy && e.Status == http.StatusTooManyRequests
}

// wire types

type wireMessage struct {
	Role string `json:"role"`
	// Content is null for an assistant message that only calls tools, as
	// OpenAI sends it back.
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// wireToolCall is a tool call of a message, or one delta of a streamed
// one (then only Index and some of the rest are set).
type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type wireRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens,omitempty"`
	Temperature   float32       `json:"temperature"`
	TopP          float32       `json:"top_p,omitempty"`
	Seed          uint64        `json:"seed,omitempty"`
	Stop          []string      `json:"stop,omitempty"`
	Stream        bool          `json:"stream"`
	Tools         []wireTool    `json:"tools,omitempty"`
	ToolChoice    string        `json:"tool_choice,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// wireTimings is llama.cpp's per-request report (llama-server adds it to
// the last chunk and to whole answers).
type wireTimings struct {
	CacheN      int     `json:"cache_n"`
	PromptN     int     `json:"prompt_n"`
	PromptMs    float64 `json:"prompt_ms"`
	PredictedN  int     `json:"predicted_n"`
	PredictedMs float64 `json:"predicted_ms"`
}

type wireError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

type wireChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string         `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"delta"`
		Message struct { // non-stream answers
			Content   string         `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
	Timings *wireTimings `json:"timings"`
	Error   *wireError   `json:"error"`
}

// body builds the request JSON. Its error (a tool's parameters are not a
// JSON object, calls and results do not pair) wraps llm.ErrInvalid.
func (c *Client) body(req llm.Request, stream bool, maxTokens int) ([]byte, error) {
	if err := toolcall.CheckRequest(req); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	w := wireRequest{Model: c.cfg.Model, MaxTokens: maxTokens, Temperature: req.Temperature,
		TopP: req.TopP, Seed: req.Seed, Stop: req.Stop, Stream: stream}
	w.Messages = make([]wireMessage, len(req.Messages))
	for i, m := range req.Messages {
		wm := wireMessage{Role: m.Role, Content: &m.Content, ToolCallID: m.ToolCallID}
		if len(m.ToolCalls) > 0 && m.Content == "" {
			wm.Content = nil
		}
		for _, tc := range m.ToolCalls {
			var wc wireToolCall
			wc.ID, wc.Type = tc.ID, "function"
			wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
			if wc.Function.Arguments == "" {
				wc.Function.Arguments = "{}"
			}
			wm.ToolCalls = append(wm.ToolCalls, wc)
		}
		w.Messages[i] = wm
	}
	for _, t := range req.Tools {
		var wt wireTool
		wt.Type = "function"
		wt.Function.Name, wt.Function.Description = t.Name, t.Description
		wt.Function.Parameters, _ = toolcall.Parameters(t) // checked above
		w.Tools = append(w.Tools, wt)
	}
	if len(w.Tools) > 0 {
		w.ToolChoice = req.ToolChoice // "" leaves OpenAI's default, auto
	}
	if stream {
		w.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	return json.Marshal(w)
}

// Stream implements llm.Model. It fails at once with a busy Error while a
// 429's Retry-After lasts, and with an error wrapping llm.ErrInvalid for a
// request whose tools or tool messages are malformed; everything else
// arrives on the channel.
func (c *Client) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	if err := c.busy(); err != nil {
		return nil, err
	}
	body, err := c.body(req, !c.cfg.NoStream, req.MaxTokens)
	if err != nil {
		return nil, err
	}
	out := make(chan llm.Token, 16)
	go c.run(ctx, req, body, out)
	return out, nil
}

func (c *Client) busy() error {
	until := c.busyUntil.Load()
	if wait := time.Until(time.Unix(0, until)); until != 0 && wait > 0 {
		return &Error{Where: c.where, Status: http.StatusTooManyRequests, Message: "server asked to retry after " + wait.Round(time.Millisecond).String(), RetryAfter: wait}
	}
	return nil
}

// errNoRetry marks an attempt's error as final.
type errNoRetry struct{ error }

func (e errNoRetry) Unwrap() error { return e.error }

// timeoutCause cancels a request whose server went quiet.
type timeoutCause struct{ what string }

func (e timeoutCause) Error() string { return "timed out waiting for the " + e.what }

func (c *Client) run(ctx context.Context, req llm.Request, body []byte, out chan<- llm.Token) {
	defer close(out)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var watch *time.Timer
	arm := func(d time.Duration, what string) {
		if watch != nil {
			watch.Stop()
		}
		if d > 0 {
			watch = time.AfterFunc(d, func() { cancel(timeoutCause{what}) })
		}
	}
	defer func() {
		if watch != nil {
			watch.Stop()
		}
	}()
	arm(c.cfg.TimeoutFirstToken, "first token")
	var firstDeadline time.Time
	if c.cfg.TimeoutFirstToken > 0 {
		firstDeadline = time.Now().Add(c.cfg.TimeoutFirstToken)
	}

	sent := false // a token went out: no more retries
	emit := func(t llm.Token) bool {
		if (t.Text != "" || len(t.ToolCalls) > 0) && !sent {
			sent = true
		}
		select {
		case out <- t:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// The limits count only the server's time: the watch stops while a
	// token waits for the reader, and the idle limit starts after. A tool
	// call's argument deltas are tokens too, though none is passed on until
	// the call is whole.
	pause := func() { arm(0, "") }
	onEvent := func(progress bool) {
		if sent || progress {
			arm(c.cfg.TimeoutIdle, "next token")
		}
	}
	stream := !c.cfg.NoStream
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sent && !firstDeadline.IsZero() {
			// The last attempt may have left the idle watch on: the first
			// token's limit covers all attempts together.
			arm(max(time.Until(firstDeadline), time.Millisecond), "first token")
		}
		err := c.attempt(rctx, body, req.Conversation, stream, emit, pause, onEvent)
		if err == nil || ctx.Err() != nil {
			return
		}
		if cause := context.Cause(rctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = &Error{Where: c.where, Message: cause.Error()}
		}
		var final errNoRetry
		if sent || errors.As(err, &final) || attempt >= c.cfg.Retries || rctx.Err() != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = &Error{Where: c.where, Message: err.Error()}
			}
			emit(llm.Token{Err: e})
			return
		}
		// Back off 100, 200, 400 ms ... (at most 2 s), with jitter.
		d := min(100*time.Millisecond<<attempt, 2*time.Second)
		d = d/2 + rand.N(d/2+1) //nolint:gosec // back-off jitter needs no secrecy
		select {
		case <-time.After(d):
		case <-rctx.Done():
		}
	}
}

// attempt sends one request and passes its tokens on. It returns nil when
// the answer ended (Done sent, or ctx ended).
func (c *Client) attempt(ctx context.Context, body []byte, conv string, stream bool, emit func(llm.Token) bool, pause func(), onEvent func(progress bool)) error {
	start := time.Now()
	var wroteAt atomic.Int64 // set on the transport's goroutine
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wroteAt.Store(time.Now().UnixNano()) }}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return errNoRetry{err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	if conv != "" {
		hreq.Header.Set(conversationHeader, conv)
	}
	for k, v := range c.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return &Error{Where: c.where, Message: transportMessage(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp)
	}
	var firstAt time.Time
	var usage llm.Usage
	var timings *wireTimings
	var calls toolcall.Assembler
	callError := func(err error) error {
		return errNoRetry{&Error{Where: c.where, Message: "malformed tool call in the answer: " + err.Error()}}
	}
	handle := func(ch *wireChunk) error {
		if ch.Error != nil {
			return errNoRetry{&Error{Where: c.where, Message: "error in stream: " + c.redact(errText(ch.Error))}}
		}
		if ch.Usage != nil {
			usage.PromptTokens, usage.CompletionTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
			if d := ch.Usage.PromptTokensDetails; d != nil {
				usage.CachedTokens = d.CachedTokens
			}
		}
		if ch.Timings != nil {
			timings = ch.Timings
		}
		progress := false
		for _, choice := range ch.Choices {
			if choice.Index != 0 {
				continue
			}
			text := choice.Delta.Content + choice.Message.Content
			deltas := choice.Delta.ToolCalls
			if len(choice.Message.ToolCalls) > 0 {
				deltas = choice.Message.ToolCalls
			}
			for _, d := range deltas {
				err := calls.Add(toolcall.Delta{Index: d.Index, ID: d.ID, Type: d.Type, Name: d.Function.Name, Arguments: d.Function.Arguments})
				if err != nil {
					return callError(err)
				}
			}
			var ready []llm.ToolCall
			if choice.FinishReason != "" {
				// The choice is over: its calls are whole, however the
				// arguments look (the caller checks them).
				rest, err := calls.Finish()
				if err != nil {
					return callError(err)
				}
				ready = append(calls.Ready(), rest...)
			} else if len(deltas) > 0 {
				ready = calls.Ready()
			}
			if text == "" && len(deltas) == 0 {
				continue
			}
			progress = true
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			if text == "" && len(ready) == 0 {
				continue
			}
			pause()
			if !emit(llm.Token{Text: text, ToolCalls: ready}) {
				return nil
			}
		}
		onEvent(progress)
		return nil
	}
	done := func() error {
		// A server that sent no finish_reason: the calls end with the answer.
		rest, err := calls.Finish()
		if err != nil {
			return callError(err)
		}
		if timings != nil && usage.CachedTokens == 0 {
			usage.CachedTokens = timings.CacheN
		}
		if timings != nil && usage.PromptTokens == 0 {
			usage.PromptTokens, usage.CompletionTokens = timings.CacheN+timings.PromptN, timings.PredictedN
		}
		if !firstAt.IsZero() {
			wrote := time.Unix(0, wroteAt.Load())
			if wroteAt.Load() == 0 || wrote.After(firstAt) {
				wrote = start
			}
			usage.TTFTNetwork, usage.TTFTServer = wrote.Sub(start), firstAt.Sub(wrote)
			if timings != nil {
				compute := ms(timings.PromptMs)
				if timings.PredictedN > 0 {
					compute += ms(timings.PredictedMs / float64(timings.PredictedN))
				}
				usage.TTFTCompute = min(compute, usage.TTFTServer)
				usage.TTFTQueue = usage.TTFTServer - usage.TTFTCompute
			}
		}
		emit(llm.Token{Done: true, Usage: &usage, ToolCalls: rest})
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if !stream || !strings.HasPrefix(ct, "text/event-stream") {
		// A whole answer (NoStream, or a server that does not stream).
		var ch wireChunk
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&ch); err != nil {
			return c.readError(ctx, err, "reading the answer")
		}
		if err := handle(&ch); err != nil || ctx.Err() != nil {
			return err
		}
		return done()
	}
	err = readSSE(resp.Body, func(data []byte) (bool, error) {
		if string(data) == "[DONE]" {
			if err := done(); err != nil {
				return false, err
			}
			// Read to the body's end, so the connection goes back to the
			// pool (a closed one costs the next turn a handshake).
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return true, nil
		}
		var ch wireChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return false, errNoRetry{&Error{Where: c.where, Message: "bad event: " + err.Error()}}
		}
		return ctx.Err() != nil, handle(&ch)
	})
	if err != nil {
		return c.readError(ctx, err, "reading the stream")
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

var errNoDone = errors.New("connection closed before [DONE]")

// readSSE calls fn with the data of each event (data: lines joined by
// newlines, dispatched at the blank line, as the SSE format says) until fn
// says stop. Comments, event:, id: and retry: lines are ignored. The body
// ending before fn stopped is errNoDone.
func readSSE(r io.Reader, fn func(data []byte) (stop bool, err error)) error {
	br := bufio.NewReaderSize(r, 16<<10)
	var data []byte
	have := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > 4<<20 {
					return errors.New("event line over 4 MiB")
				}
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		eof := err != nil
		line = bytes.TrimRight(line, "\r\n")
		if eof && len(line) == 0 {
			if have { // a last event without its blank line
				if stop, ferr := fn(data); ferr != nil || stop {
					return ferr
				}
			}
			return errNoDone
		}
		if len(line) == 0 {
			if have {
				if stop, err := fn(data); err != nil || stop {
					return err
				}
			}
			data, have = data[:0], false
			continue
		}
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if have {
			data = append(data, '\n')
		}
		data, have = append(data, v...), true
		if eof {
			if stop, ferr := fn(data); ferr != nil || stop {
				return ferr
			}
			return errNoDone
		}
	}
}

// readError names a failure while reading a response body.
func (c *Client) readError(ctx context.Context, err error, what string) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, errNoDone) {
		return &Error{Where: c.where, Message: errNoDone.Error()}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Error{Where: c.where, Message: what + ": " + transportMessage(err)}
}

// statusError reads an error response: OpenAI's {"error":{...}} body, or
// the first line of whatever else came.
func (c *Client) statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	e := &Error{Where: c.where, Status: resp.StatusCode}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && len(body.Error) > 0 {
		var we wireError
		if json.Unmarshal(body.Error, &we) == nil && we.Message != "" {
			e.Message = errText(&we)
		} else { // Ollama and others: "error": "text"
			var s string
			_ = json.Unmarshal(body.Error, &s)
			e.Message = s
		}
	}
	if e.Message == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		e.Message = strings.TrimSpace(http.StatusText(resp.StatusCode) + " " + line)
	}
	e.Message = c.redact(e.Message)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		if e.RetryAfter > 0 {
			c.busyUntil.Store(time.Now().Add(e.RetryAfter).UnixNano())
		}
		return errNoRetry{e}
	case resp.StatusCode >= 500:
		return e
	default:
		return errNoRetry{e}
	}
}

// redact hides the API key in a message from the server (some echo the
// key they refused), so it never reaches a log line.
func (c *Client) redact(msg string) string {
	if k := c.cfg.APIKey; len(k) >= 4 {
		msg = strings.ReplaceAll(msg, k, "[api key]")
	}
	return msg
}

func errText(we *wireError) string {
	s := we.Message
	if code := fmt.Sprint(we.Code); we.Code != nil && code != "" {
		s += " (" + code + ")"
	}
	return s
}

// retryAfter parses Retry-After: seconds or an HTTP date; capped at 60 s.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return max(0, min(d, time.Minute))
}

// transportMessage shortens a transport error without its URL (which may
// carry credentials in userinfo).
func transportMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// prefilling adds llm.Prefiller to a Client.
type prefilling struct{ *Client }

// Prefill sends req as a one-token, non-streamed request so the server's
// prompt cache holds it. It returns the prompt tokens the server did not
// find cached.
func (p *prefilling) Prefill(ctx context.Context, req llm.Request) (int, error) {
	if err := p.busy(); err != nil {
		return 0, err
	}
	body, err := p.body(req, false, 1)
	if err != nil {
		return 0, err
	}
	var usage *llm.Usage
	err = p.attempt(ctx, body, req.Conversation, false, func(t llm.Token) bool {
		if t.Done {
			usage = t.Usage
		}
		return true
	}, func() {}, func(bool) {})
	if err != nil {
		return 0, err
	}
	if usage == nil {
		return 0, ctx.Err()
	}
	return usage.PromptTokens - usage.CachedTokens, nil
}
