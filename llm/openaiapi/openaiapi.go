// Package openaiapi serves an OpenAI-compatible API for an llm.Model:
// POST /v1/chat/completions (streamed as server-sent events, or one JSON
// response) and GET /v1/models. Streams follow OpenAI's framing exactly:
// "data: {chunk}\n\n" lines, a first delta carrying the role, a last chunk
// with finish_reason, usage in an extra chunk when
// stream_options.include_usage is set, then "data: [DONE]".
//
// Conversations: a request names the conversation it continues with the
// ConversationHeader header, or OpenAI's prompt_cache_key (or user) field;
// the model keeps that conversation's state (the engine's KV cache) apart
// from others', so concurrent remote sessions do not evict each other.
// Without one, every request shares one anonymous conversation. Behind
// web/access with API keys, ids are scoped by key: the same id sent with
// two keys names two conversations, and each key has its own anonymous one.
//
// Tools: a request's "tools" (type "function"; names ^[a-zA-Z0-9_-]{1,64}$,
// parameters a JSON object schema) and "tool_choice" reach the model as
// llm.Request.Tools and ToolChoice (a named function becomes that tool
// alone, required). The model's calls come back in OpenAI's shape: whole,
// one streamed delta.tool_calls entry each (index, id, type "function",
// name and arguments), or message.tool_calls, with finish_reason
// "tool_calls". voxpipe never runs a tool for a /v1 caller, and returns
// only calls to tools the request offered: a call to any other tool (or
// any call under tool_choice "none") is dropped and logged, and the answer
// ends as if the model had not made it. History may carry assistant
// tool_calls and "tool" messages; a result that answers no earlier call is
// a 400.
package openaiapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/web/access"
)

// Limits bound what one request may ask for; a request over one gets a
// 400 naming the parameter. Zero fields take the defaults.
type Limits struct {
	MaxBodyBytes int64 // request body; default 8 MiB
	MaxMessages  int   // messages in a request; default 1024
	// MaxStops is how many stop strings a request may give (default and
	// most: 4, as OpenAI allows); each is at most MaxStopBytes.
	MaxStops int
	// MaxTokens is the largest max_tokens a request may ask for; 0: any
	// (the model bounds it by its context).
	MaxTokens int
	// MaxTools is how many tools a request may offer (default and most:
	// DefaultMaxTools, as OpenAI allows).
	MaxTools int
	// OnReject, when set, is told the parameter of each refused request
	// (for a metric).
	OnReject func(param string)
	// Answers, when set, answers the requests that opt in from an answer
	// cache (cache.go). Not a limit: the handler's one other option.
	Answers *Answers
}

// Defaults and hard bounds of Limits.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultMaxMessages  = 1024
	MaxStops            = 4
	MaxStopBytes        = 128
	// MaxConversationBytes bounds a conversation id.
	MaxConversationBytes = 256
)

// ConversationHeader is the request header that names the conversation a
// request continues (voxpipe's llm/openai client sends its session id in
// it). It takes precedence over the body's prompt_cache_key and user.
const ConversationHeader = "X-Voxpipe-Conversation"

// CacheHeader is the response header that says what the answer cache did
// for a request that opted in ("voxpipe_cache": true): hit, miss, or
// bypass (not one question safe to cache).
const CacheHeader = "X-Voxpipe-Cache"

// conversationPrefix keeps /v1 conversations apart from the voice
// sessions' own on the same model.
const conversationPrefix = "v1:"

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxStops <= 0 || l.MaxStops > MaxStops {
		l.MaxStops = MaxStops
	}
	if l.MaxTools <= 0 || l.MaxTools > DefaultMaxTools {
		l.MaxTools = DefaultMaxTools
	}
	return l
}

type server struct {
	model   llm.Model
	modelID string
	created int64
	log     zerolog.Logger
	lim     Limits
}

// New returns a handler serving /v1/chat/completions and /v1/models for
// model under the name modelID, with the default Limits. Paths also match
// without the /v1 prefix, so the handler works mounted whole or behind
// http.StripPrefix("/v1", …).
func New(model llm.Model, modelID string, log zerolog.Logger) http.Handler {
	return NewWithLimits(model, modelID, log, Limits{})
}

// NewWithLimits is New with request limits.
func NewWithLimits(model llm.Model, modelID string, log zerolog.Logger, lim Limits) http.Handler {
	s := &server{model: model, modelID: modelID, created: time.Now().Unix(), log: log, lim: lim.withDefaults()}
	mux := http.NewServeMux()
	for _, prefix := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+prefix+"/chat/completions", s.chatCompletions)
		mux.HandleFunc("GET "+prefix+"/models", s.listModels)
		mux.HandleFunc("GET "+prefix+"/models/{id}", s.getModel)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{
			status:  http.StatusNotFound,
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
			Code:    strPtr("unknown_url"),
		})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, map[string]*apiError{"error": e})
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *server) modelObject() modelObject {
	return modelObject{ID: s.modelID, Object: "model", Created: s.created, OwnedBy: "voxpipe"}
}

func (s *server) listModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelObject{s.modelObject()}})
}

func (s *server) getModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.modelID {
		writeError(w, modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// chatRequest holds the fields of OpenAI's request that this server uses;
// other fields are accepted and ignored.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Temperature         *float32      `json:"temperature"`
	TopP                *float32      `json:"top_p"`
	Seed                *int64        `json:"seed"`
	Stop                stopList      `json:"stop"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N *int `json:"n"`
	// Tools and ToolChoice: tools.go. parallel_tool_calls is accepted and
	// not enforced: the model's calls all come back.
	Tools      []chatTool      `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	// PromptCacheKey is OpenAI's cache-routing key; User its older
	// end-user id. Either names the conversation when the header does not.
	PromptCacheKey string `json:"prompt_cache_key"`
	User           string `json:"user"`
	// VoxpipeCache opts the request in to voxpipe's answer cache
	// (Limits.Answers); the response's X-Voxpipe-Cache header says hit or
	// miss.
	VoxpipeCache bool `json:"voxpipe_cache"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    messageContent `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
}

// messageContent is a string or an array of content parts (text parts are
// joined; other kinds are refused).
type messageContent string

func (c *messageContent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = messageContent(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		sb.WriteString(p.Text)
	}
	*c = messageContent(sb.String())
	return nil
}

// stopList is a string or an array of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

// parseRequest decodes and validates the body into an llm.Request. The
// map holds the tool names the answer may call (tools.go).
func (s *server) parseRequest(r *http.Request) (*chatRequest, llm.Request, map[string]bool, *apiError) {
	raw, out, apiErr := s.parseBody(r)
	if apiErr != nil {
		return nil, llm.Request{}, nil, apiErr
	}
	allowed, apiErr := s.parseTools(raw, &out)
	if apiErr != nil {
		return nil, llm.Request{}, nil, apiErr
	}
	if err := llm.ValidateToolMessages(out.Messages); err != nil {
		return nil, llm.Request{}, nil, invalidRequest("Invalid tool messages: "+strings.TrimPrefix(err.Error(), llm.ErrInvalid.Error()+": ")+".", "messages")
	}
	return raw, out, allowed, nil
}

func (s *server) parseBody(r *http.Request) (*chatRequest, llm.Request, *apiError) {
	var req chatRequest
	body := http.MaxBytesReader(nil, r.Body, s.lim.MaxBodyBytes)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("Request body is larger than %d bytes.", s.lim.MaxBodyBytes), "body")
		}
		return nil, llm.Request{}, invalidRequest("We could not parse the JSON body of your request: "+err.Error(), "")
	}
	if req.Model != "" && req.Model != s.modelID {
		return nil, llm.Request{}, modelNotFound(req.Model)
	}
	if len(req.Messages) == 0 {
		return nil, llm.Request{}, invalidRequest("messages must be a non-empty array.", "messages")
	}
	if len(req.Messages) > s.lim.MaxMessages {
		return nil, llm.Request{}, invalidRequest(fmt.Sprintf("messages has %d items; at most %d are allowed.", len(req.Messages), s.lim.MaxMessages), "messages")
	}
	if len(req.Stop) > s.lim.MaxStops {
		return nil, llm.Request{}, invalidRequest(fmt.Sprintf("stop has %d items; at most %d are allowed.", len(req.Stop), s.lim.MaxStops), "stop")
	}
	for i, st := range req.Stop {
		if len(st) > MaxStopBytes {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("stop[%d] is %d bytes; at most %d are allowed.", i, len(st), MaxStopBytes), "stop")
		}
	}
	out := llm.Request{Temperature: 1, Stop: req.Stop} // OpenAI's default temperature is 1
	for i, m := range req.Messages {
		role := m.Role
		switch role {
		case "developer":
			role = llm.RoleSystem
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant:
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, llm.Request{}, invalidRequest(fmt.Sprintf("messages[%d].tool_call_id is missing: a tool message answers a call by its id.", i), fmt.Sprintf("messages[%d].tool_call_id", i))
			}
		case "":
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("messages[%d].role is missing.", i), fmt.Sprintf("messages[%d].role", i))
		default:
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("messages[%d].role %.32q is not supported (system, developer, user, assistant or tool).", i, role), fmt.Sprintf("messages[%d].role", i))
		}
		msg := llm.Message{Role: role, Content: string(m.Content)}
		if len(m.ToolCalls) > 0 {
			if role != llm.RoleAssistant {
				return nil, llm.Request{}, invalidRequest(fmt.Sprintf("messages[%d] has tool_calls; only assistant messages may.", i), fmt.Sprintf("messages[%d].tool_calls", i))
			}
			calls, apiErr := parseToolCalls(i, m.ToolCalls)
			if apiErr != nil {
				return nil, llm.Request{}, apiErr
			}
			msg.ToolCalls = calls
		}
		if role == llm.RoleTool {
			msg.ToolCallID = m.ToolCallID
		}
		out.Messages = append(out.Messages, msg)
	}
	if req.N != nil && *req.N != 1 {
		return nil, llm.Request{}, invalidRequest("Only n=1 is supported.", "n")
	}
	maxTokens := req.MaxTokens
	param := "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxTokens, param = req.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("%s must be at least 1, got %d.", param, *maxTokens), param)
		}
		if s.lim.MaxTokens > 0 && *maxTokens > s.lim.MaxTokens {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("%s is %d; at most %d are allowed.", param, *maxTokens, s.lim.MaxTokens), param)
		}
		out.MaxTokens = *maxTokens
	}
	if req.Temperature != nil {
		if *req.Temperature < 0 || *req.Temperature > 2 {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("temperature must be between 0 and 2, got %g.", *req.Temperature), "temperature")
		}
		out.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		if *req.TopP <= 0 || *req.TopP > 1 {
			return nil, llm.Request{}, invalidRequest(fmt.Sprintf("top_p must be in (0, 1], got %g.", *req.TopP), "top_p")
		}
		if *req.TopP < 1 {
			out.TopP = *req.TopP
		}
	}
	if req.Seed != nil {
		out.Seed = uint64(*req.Seed)
	}
	if out.MaxTokens == 0 && s.lim.MaxTokens > 0 {
		out.MaxTokens = s.lim.MaxTokens
	}
	conv, param := r.Header.Get(ConversationHeader), "header "+ConversationHeader
	switch {
	case conv != "":
	case req.PromptCacheKey != "":
		conv, param = req.PromptCacheKey, "prompt_cache_key"
	default:
		conv, param = req.User, "user"
	}
	if len(conv) > MaxConversationBytes {
		return nil, llm.Request{}, invalidRequest(fmt.Sprintf("%s is %d bytes; at most %d are allowed.", param, len(conv), MaxConversationBytes), param)
	}
	// Scoped by who was let in (web/access.Principal: the API key's id):
	// one key cannot reach another's conversation, nor read its prefix
	// from cached_tokens; each key gets its own anonymous one too. With
	// auth off there is no one to tell apart.
	scope := conversationPrefix
	if p := access.Principal(r); p != "" {
		scope += p + ":"
	}
	if conv != "" || scope != conversationPrefix {
		out.Conversation = scope + conv
	}
	return &req, out, nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on supported platforms
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func toUsage(u *llm.Usage) usageJSON {
	var out usageJSON
	if u != nil {
		out.PromptTokens, out.CompletionTokens = u.PromptTokens, u.CompletionTokens
		out.TotalTokens = u.PromptTokens + u.CompletionTokens
		out.PromptTokensDetails.CachedTokens = u.CachedTokens
	}
	return out
}

// finishReason infers "length" from the usage: llm.Token does not say why
// generation ended, but reaching max_tokens is the only cut besides a stop.
func finishReason(req llm.Request, u *llm.Usage) string {
	if req.MaxTokens > 0 && u != nil && u.CompletionTokens >= req.MaxTokens {
		return "length"
	}
	return "stop"
}

func (s *server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	raw, req, allowed, apiErr := s.parseRequest(r)
	if apiErr != nil {
		s.log.Debug().Str("error", apiErr.Message).Int("status", apiErr.status).Msg("openaiapi: bad request")
		if s.lim.OnReject != nil && apiErr.Param != nil {
			param, _, _ := strings.Cut(*apiErr.Param, "[")
			s.lim.OnReject(param)
		}
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithCancel(r.Context()) // ends when the client disconnects
	defer cancel()
	var tokens <-chan llm.Token
	var err error
	cached := ""
	if raw.VoxpipeCache && s.lim.Answers != nil {
		tokens, cached, err = s.lim.Answers.stream(ctx, s.model, req)
		w.Header().Set(CacheHeader, cached)
	} else {
		tokens, err = s.model.Stream(ctx, req)
	}
	if err != nil {
		if errors.Is(err, llm.ErrBusy) {
			writeError(w, busy())
			return
		}
		if errors.Is(err, llm.ErrInvalid) {
			s.log.Debug().Err(err).Msg("openaiapi: model refused the request")
			writeError(w, invalidRequest("The model cannot take this request: "+err.Error(), "messages"))
			return
		}
		s.log.Error().Err(err).Msg("openaiapi: model refused the request")
		writeError(w, serverError("The model could not start: "+err.Error()))
		return
	}
	// Whatever happens below, let the backend finish closing its channel so
	// its goroutine never blocks on a send nobody reads.
	defer func() {
		cancel()
		for range tokens {
		}
	}()
	id, created := newID(), time.Now().Unix()
	var usage *llm.Usage
	var genErr error
	if raw.Stream {
		includeUsage := raw.StreamOptions != nil && raw.StreamOptions.IncludeUsage
		usage, genErr = s.stream(ctx, w, tokens, req, allowed, id, created, includeUsage)
	} else {
		usage, genErr = s.complete(ctx, w, tokens, req, allowed, id, created)
	}
	ev := s.log.Debug()
	if genErr != nil {
		ev = s.log.Warn().Err(genErr)
	}
	if usage != nil {
		ev = ev.Int("prompt_tokens", usage.PromptTokens).Int("completion_tokens", usage.CompletionTokens)
	}
	if cached != "" {
		ev = ev.Str("cache", cached)
	}
	ev.Bool("stream", raw.Stream).Dur("took", time.Since(start)).Msg("openaiapi: chat completion")
}

// complete collects the whole answer and writes one chat.completion.
func (s *server) complete(ctx context.Context, w http.ResponseWriter, tokens <-chan llm.Token, req llm.Request, allowed map[string]bool, id string, created int64) (*llm.Usage, error) {
	var text strings.Builder
	var calls []llm.ToolCall
	for {
		select {
		case <-ctx.Done():
			if e := cutError(ctx); e != nil {
				writeError(w, e)
			}
			return nil, context.Cause(ctx)
		case tok, ok := <-tokens:
			if !ok {
				writeError(w, serverError("The model ended the stream without finishing."))
				return nil, errors.New("openaiapi: token channel closed before Done")
			}
			text.WriteString(tok.Text)
			calls = append(calls, s.answerCalls(tok.ToolCalls, allowed)...)
			if tok.Err != nil {
				if errors.Is(tok.Err, llm.ErrBusy) {
					writeError(w, busy())
				} else {
					writeError(w, serverError("Generation failed: "+tok.Err.Error()))
				}
				return nil, tok.Err
			}
			if !tok.Done {
				continue
			}
			msg := map[string]any{"role": "assistant", "content": text.String(), "refusal": nil}
			finish := finishReason(req, tok.Usage)
			if len(calls) > 0 {
				msg["tool_calls"] = wireCalls(calls, 0, false)
				finish = "tool_calls"
				if text.Len() == 0 {
					msg["content"] = nil // as OpenAI answers a call without text
				}
			}
			writeJSON(w, http.StatusOK, map[string]any{
				"id":                 id,
				"object":             "chat.completion",
				"created":            created,
				"model":              s.modelID,
				"system_fingerprint": nil,
				"choices": []any{map[string]any{
					"index":         0,
					"message":       msg,
					"logprobs":      nil,
					"finish_reason": finish,
				}},
				"usage": toUsage(tok.Usage),
			})
			return tok.Usage, nil
		}
	}
}

// stream writes server-sent events as tokens arrive.
func (s *server) stream(ctx context.Context, w http.ResponseWriter, tokens <-chan llm.Token, req llm.Request, allowed map[string]bool, id string, created int64, includeUsage bool) (*llm.Usage, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // keep proxies from buffering the stream
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	cw := newChunkWriter(id, created, s.modelID, includeUsage)
	send := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if err := send(cw.roleChunk()); err != nil {
		return nil, err
	}
	nCalls := 0 // calls sent: the next one's index
	for {
		select {
		case <-ctx.Done():
			if e := cutError(ctx); e != nil {
				_ = send(cw.errorEvent(e))
			}
			return nil, context.Cause(ctx)
		case tok, ok := <-tokens:
			if !ok {
				_ = send(cw.errorEvent(serverError("The model ended the stream without finishing.")))
				return nil, errors.New("openaiapi: token channel closed before Done")
			}
			if tok.Text != "" {
				if err := send(cw.contentChunk(tok.Text)); err != nil {
					return nil, err
				}
			}
			if calls := s.answerCalls(tok.ToolCalls, allowed); len(calls) > 0 {
				// Each call goes out whole as soon as the model has it.
				if err := send(cw.toolCallsChunk(calls, nCalls)); err != nil {
					return nil, err
				}
				nCalls += len(calls)
			}
			if tok.Err != nil {
				_ = send(cw.errorEvent(serverError("Generation failed: " + tok.Err.Error())))
				return nil, tok.Err
			}
			if !tok.Done {
				continue
			}
			finish := finishReason(req, tok.Usage)
			if nCalls > 0 {
				finish = "tool_calls"
			}
			out := cw.finishChunk(finish)
			if includeUsage {
				out = append(out, cw.usageChunk(toUsage(tok.Usage))...)
			}
			out = append(out, "data: [DONE]\n\n"...)
			return tok.Usage, send(out)
		}
	}
}

// cutError is what a client still there is told when its request's
// context ended for another reason than its own leaving (the server
// shutting down, a deadline); nil when the client left.
func cutError(ctx context.Context) *apiError {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return nil
	}
	return &apiError{status: http.StatusServiceUnavailable, Message: "The request was cut: " + cause.Error() + ".", Type: "server_error"}
}

// chunkWriter builds chat.completion.chunk events. Content chunks are
// assembled by hand into a reused buffer: they are the per-token path.
type chunkWriter struct {
	prefix       []byte // `data: {"id":…,"choices":[{"index":0,"delta":`
	includeUsage bool
	id           string
	created      int64
	model        string
	buf          []byte
}

func newChunkWriter(id string, created int64, model string, includeUsage bool) *chunkWriter {
	c := &chunkWriter{includeUsage: includeUsage, id: id, created: created, model: model}
	p := []byte(`data: {"id":`)
	p = appendJSONString(p, id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":`...)
	p = appendJSONString(p, model)
	p = append(p, `,"system_fingerprint":null,"choices":[{"index":0,"delta":`...)
	c.prefix = p
	return c
}

func (c *chunkWriter) chunk(delta []byte, finish string) []byte {
	b := append(c.buf[:0], c.prefix...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, finish)
	}
	b = append(b, "}]"...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, "}\n\n"...)
	c.buf = b
	return b
}

func (c *chunkWriter) roleChunk() []byte {
	return c.chunk([]byte(`{"role":"assistant","content":"","refusal":null}`), "")
}

func (c *chunkWriter) contentChunk(text string) []byte {
	// The delta goes straight into buf after the prefix; no intermediate copy.
	b := append(c.buf[:0], c.prefix...)
	b = append(b, `{"content":`...)
	b = appendJSONString(b, text)
	b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, "}\n\n"...)
	c.buf = b
	return b
}

func (c *chunkWriter) finishChunk(reason string) []byte {
	return append([]byte(nil), c.chunk([]byte(`{}`), reason)...)
}

func (c *chunkWriter) usageChunk(u usageJSON) []byte {
	body, _ := json.Marshal(map[string]any{
		"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"system_fingerprint": nil, "choices": []any{}, "usage": u,
	})
	return append(append([]byte("data: "), body...), "\n\n"...)
}

func (c *chunkWriter) errorEvent(e *apiError) []byte {
	body, _ := json.Marshal(map[string]*apiError{"error": e})
	return append(append([]byte("data: "), body...), "\n\n"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD
// and U+2028/U+2029 are escaped, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			b = append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
		default:
			b = utf8.AppendRune(b, r) // ranging turned invalid bytes into U+FFFD
		}
	}
	return append(b, '"')
}
