package openaiapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/web/access"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scriptedModel is a test double of llm.Model: it streams fixed pieces, or
// blocks until the request's context ends.
type scriptedModel struct {
	pieces   []string
	usage    *llm.Usage
	startErr error // returned by Stream
	tokenErr error // sent after the pieces instead of Done
	block    bool  // after the pieces, wait for ctx to end

	mu       sync.Mutex
	requests []llm.Request
	blocking chan struct{} // closed when a blocking stream has sent its pieces
	stopped  chan struct{} // closed when a blocked stream saw ctx end
}

func (m *scriptedModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	if m.startErr != nil {
		return nil, m.startErr
	}
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		send := func(t llm.Token) bool {
			select {
			case out <- t:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, p := range m.pieces {
			if !send(llm.Token{Text: p}) {
				return
			}
		}
		if m.block {
			close(m.blocking)
			<-ctx.Done()
			close(m.stopped)
			return
		}
		if m.tokenErr != nil {
			send(llm.Token{Err: m.tokenErr})
			return
		}
		send(llm.Token{Done: true, Usage: m.usage})
	}()
	return out, nil
}

func newServer(t *testing.T, m llm.Model) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(m, "voxpipe-test", zerolog.Nop()))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, resp *http.Response) errorBody {
	t.Helper()
	raw, _ := io.ReadAll(resp.Body)
	var e errorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", raw)
	}
	// All four keys are present, null or not.
	var keys map[string]map[string]json.RawMessage
	_ = json.Unmarshal(raw, &keys)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := keys["error"][k]; !ok {
			t.Errorf("error body lacks %q: %s", k, raw)
		}
	}
	return e
}

const hello = `{"model":"voxpipe-test","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}]`

func TestNonStream(t *testing.T) {
	m := &scriptedModel{pieces: []string{"Hello", " wor", "ld \"quoted\"\n"}, usage: &llm.Usage{PromptTokens: 12, CompletionTokens: 3, CachedTokens: 4}}
	srv := newServer(t, m)
	resp := post(t, srv, hello+`,"max_tokens":50,"temperature":0.5,"top_p":0.9,"seed":42,"stop":"\n\n"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var body struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			TotalTokens         int `json:"total_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(body.ID, "chatcmpl-") || body.Object != "chat.completion" || body.Created == 0 || body.Model != "voxpipe-test" {
		t.Errorf("envelope %+v", body)
	}
	if len(body.Choices) != 1 || body.Choices[0].Message.Role != "assistant" || body.Choices[0].Message.Content != "Hello world \"quoted\"\n" || body.Choices[0].FinishReason != "stop" {
		t.Errorf("choices %+v", body.Choices)
	}
	if body.Usage.PromptTokens != 12 || body.Usage.CompletionTokens != 3 || body.Usage.TotalTokens != 15 || body.Usage.PromptTokensDetails.CachedTokens != 4 {
		t.Errorf("usage %+v", body.Usage)
	}
	req := m.requests[0]
	if req.MaxTokens != 50 || req.Temperature != 0.5 || req.TopP != 0.9 || req.Seed != 42 || len(req.Stop) != 1 || req.Stop[0] != "\n\n" {
		t.Errorf("request %+v", req)
	}
	if len(req.Messages) != 2 || req.Messages[1].Content != "hi there" || req.Messages[0].Role != llm.RoleSystem {
		t.Errorf("messages %+v", req.Messages)
	}
}

func TestRequestMapping(t *testing.T) {
	m := &scriptedModel{usage: &llm.Usage{CompletionTokens: 7}}
	srv := newServer(t, m)
	resp := post(t, srv, `{"messages":[{"role":"developer","content":"x"},{"role":"user","content":"y"}],"max_tokens":5,"max_completion_tokens":7,"stop":["a","b"]}`)
	var body struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q, want length", body.Choices[0].FinishReason)
	}
	req := m.requests[0]
	if req.MaxTokens != 7 || req.Temperature != 1 || len(req.Stop) != 2 || req.Messages[0].Role != llm.RoleSystem {
		t.Errorf("request %+v", req)
	}
}

// readEvents parses an SSE body line by line: every event is one "data: "
// line followed by a blank line.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	sc := bufio.NewScanner(r)
	var events []string
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("expected a blank line after an event, got %q", line)
			}
			expectBlank = false
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("line %q is not a data line", line)
		}
		events = append(events, strings.TrimPrefix(line, "data: "))
		expectBlank = true
	}
	if expectBlank {
		t.Fatal("stream ended without the blank line after the last event")
	}
	return events
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestStream(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		m := &scriptedModel{pieces: []string{"Hi", " \"there\"", "\n日本\u2028"}, usage: &llm.Usage{PromptTokens: 5, CompletionTokens: 3}}
		srv := newServer(t, m)
		body := hello + `,"stream":true}`
		if includeUsage {
			body = hello + `,"stream":true,"stream_options":{"include_usage":true}}`
		}
		resp := post(t, srv, body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		events := readEvents(t, resp.Body)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("last event %q", events[len(events)-1])
		}
		var chunks []chunk
		var rawChunks []map[string]json.RawMessage
		for _, e := range events[:len(events)-1] {
			var c chunk
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("event %q: %v", e, err)
			}
			var raw map[string]json.RawMessage
			_ = json.Unmarshal([]byte(e), &raw)
			chunks = append(chunks, c)
			rawChunks = append(rawChunks, raw)
		}
		wantChunks := 5 // role, 3 contents, finish
		if includeUsage {
			wantChunks++
		}
		if len(chunks) != wantChunks {
			t.Fatalf("%d chunks: %q", len(chunks), events)
		}
		var text strings.Builder
		for i, c := range chunks {
			if c.ID != chunks[0].ID || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion.chunk" || c.Model != "voxpipe-test" || c.Created != chunks[0].Created {
				t.Errorf("chunk %d envelope %+v", i, c)
			}
			_, hasUsage := rawChunks[i]["usage"]
			if hasUsage != includeUsage {
				t.Errorf("chunk %d usage key present=%v", i, hasUsage)
			}
			if includeUsage && i == len(chunks)-1 {
				if len(c.Choices) != 0 || c.Usage == nil || c.Usage.TotalTokens != 8 {
					t.Errorf("usage chunk %s", events[i])
				}
				continue
			}
			if includeUsage && c.Usage != nil {
				t.Errorf("chunk %d carries usage before the end", i)
			}
			if len(c.Choices) != 1 {
				t.Fatalf("chunk %d choices %s", i, events[i])
			}
			ch := c.Choices[0]
			switch i {
			case 0:
				if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.FinishReason != nil {
					t.Errorf("first chunk %s", events[i])
				}
			case 4:
				if ch.FinishReason == nil || *ch.FinishReason != "stop" || ch.Delta.Content != nil {
					t.Errorf("finish chunk %s", events[i])
				}
			default:
				if ch.Delta.Role != nil || ch.Delta.Content == nil || ch.FinishReason != nil {
					t.Errorf("content chunk %s", events[i])
				}
				text.WriteString(*ch.Delta.Content)
			}
		}
		if text.String() != "Hi \"there\"\n日本\u2028" {
			t.Errorf("streamed text %q", text.String())
		}
	}
}

func TestErrors(t *testing.T) {
	srv := newServer(t, &scriptedModel{usage: &llm.Usage{}})
	cases := []struct {
		body   string
		status int
		typ    string
		code   string
	}{
		{`{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, 404, "invalid_request_error", "model_not_found"},
		{`{"messages":[{"role":"user","content":"x"}`, 400, "invalid_request_error", ""},
		{`not json`, 400, "invalid_request_error", ""},
		{`{"messages":[]}`, 400, "invalid_request_error", ""},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":3}`, 400, "invalid_request_error", ""},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400, "invalid_request_error", ""},
		{`{"messages":[{"role":"user","content":"x"}],"n":2}`, 400, "invalid_request_error", ""},
		{`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "invalid_request_error", ""},
		{`{"messages":[{"content":"x"}]}`, 400, "invalid_request_error", ""},
	}
	for _, c := range cases {
		resp := post(t, srv, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.body, resp.StatusCode, c.status)
			continue
		}
		e := decodeError(t, resp)
		if e.Error.Type != c.typ || (c.code != "" && (e.Error.Code == nil || *e.Error.Code != c.code)) {
			t.Errorf("%s: error %+v", c.body, e.Error)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown url status %d", resp.StatusCode)
	}
	decodeError(t, resp)
}

func TestBusy(t *testing.T) {
	for _, stream := range []string{"false", "true"} {
		srv := newServer(t, &scriptedModel{startErr: llm.ErrBusy})
		resp := post(t, srv, `{"messages":[{"role":"user","content":"x"}],"stream":`+stream+`}`)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if e := decodeError(t, resp); e.Error.Code == nil || *e.Error.Code != "rate_limit_exceeded" {
			t.Errorf("busy error %+v", e.Error)
		}
	}
	srv := newServer(t, &scriptedModel{startErr: errors.New("engine: out of memory")})
	resp := post(t, srv, `{"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 500 || decodeError(t, resp).Error.Type != "server_error" {
		t.Errorf("start failure status %d", resp.StatusCode)
	}
}

func TestGenerationErrorMidStream(t *testing.T) {
	srv := newServer(t, &scriptedModel{pieces: []string{"partial"}, tokenErr: errors.New("engine: kv cache full")})
	resp := post(t, srv, `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
	events := readEvents(t, resp.Body)
	last := events[len(events)-1]
	var e errorBody
	if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Type != "server_error" {
		t.Errorf("last event %q", last)
	}
	resp = post(t, srv, `{"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 500 {
		t.Errorf("non-stream status %d", resp.StatusCode)
	}
}

// TestClientDisconnectCancels: closing the connection mid-stream cancels
// the context given to the model.
func TestClientDisconnectCancels(t *testing.T) {
	for _, stream := range []bool{true, false} {
		m := &scriptedModel{pieces: []string{"one", "two"}, block: true, blocking: make(chan struct{}), stopped: make(chan struct{})}
		srv := newServer(t, m)
		ctx, cancel := context.WithCancel(context.Background())
		body := `{"messages":[{"role":"user","content":"x"}],"stream":true}`
		if !stream {
			body = `{"messages":[{"role":"user","content":"x"}]}`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		if !stream {
			// No response comes before the answer is complete: hang up
			// while the model is generating.
			go func() {
				<-m.blocking
				cancel()
			}()
		}
		resp, err := http.DefaultClient.Do(req)
		if stream {
			if err != nil {
				t.Fatal(err)
			}
			// Read until both pieces arrived, then hang up.
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.Contains(sc.Text(), `"two"`) {
			}
			cancel()
			resp.Body.Close()
		} else if err == nil {
			resp.Body.Close()
			t.Error("non-stream request completed although the model never finished")
		}
		cancel()
		<-m.stopped // the model saw its context end
	}
}

func TestModels(t *testing.T) {
	srv := newServer(t, &scriptedModel{})
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "voxpipe-test" || list.Data[0].Object != "model" {
		t.Errorf("models %+v", list)
	}
	resp2, err := http.Get(srv.URL + "/v1/models/other")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if resp2.StatusCode != 404 {
		t.Errorf("unknown model status %d", resp2.StatusCode)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"plain", "q\"b\\", "ctl\x01\x1f\t\r\n", "日本😀", "bad\xff\xfe", "\u2028\u2029", "<&>"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q: round trip %q, want %q", s, back, wantBack)
		}
	}
}

func BenchmarkContentChunk(b *testing.B) {
	cw := newChunkWriter("chatcmpl-0123456789abcdef01234567", 1700000000, "voxpipe-test", true)
	var sink bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		sink.Write(cw.contentChunk(" hello"))
	}
}

func newServerWith(t *testing.T, m llm.Model, lim Limits) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewWithLimits(m, "voxpipe-test", zerolog.Nop(), lim))
	t.Cleanup(srv.Close)
	return srv
}

// TestConversation: the header, else prompt_cache_key, else user names the
// request's conversation (kept apart from the voice sessions' keys); none
// leaves it anonymous; an over-long one is a 400 naming where it came from.
func TestConversation(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"y"}]`
	cases := []struct {
		name, header, extra, want string
	}{
		{"none", "", "", ""},
		{"header", "sess-1", `,"prompt_cache_key":"k","user":"u"`, "v1:sess-1"},
		{"prompt_cache_key", "", `,"prompt_cache_key":"k","user":"u"`, "v1:k"},
		{"user", "", `,"user":"u"`, "v1:u"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &scriptedModel{usage: &llm.Usage{}}
			srv := newServer(t, m)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body+c.extra+"}"))
			if c.header != "" {
				req.Header.Set(ConversationHeader, c.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(m.requests) != 1 {
				t.Fatalf("status %d, %d requests", resp.StatusCode, len(m.requests))
			}
			if got := m.requests[0].Conversation; got != c.want {
				t.Errorf("Conversation %q, want %q", got, c.want)
			}
		})
	}
	m := &scriptedModel{usage: &llm.Usage{}}
	resp := post(t, newServer(t, m), body+`,"user":"`+strings.Repeat("u", MaxConversationBytes+1)+`"}`)
	if e := decodeError(t, resp); resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != "user" {
		t.Errorf("over-long user: status %d, %+v", resp.StatusCode, e.Error)
	}
	if len(m.requests) != 0 {
		t.Error("the model saw a refused request")
	}
}

// TestConversationScopedByKey: behind the access guard with API keys, the
// same conversation id sent with two keys names two conversations, and
// each key's anonymous requests have a conversation of their own, so one
// key can neither continue nor probe (cached_tokens) another's.
func TestConversationScopedByKey(t *testing.T) {
	m := &scriptedModel{usage: &llm.Usage{}}
	g := access.New(access.Config{Keys: []string{"key-a", "key-b"}})
	srv := httptest.NewServer(g.Protect(access.Keyed, New(m, "voxpipe-test", zerolog.Nop()), nil))
	t.Cleanup(srv.Close)
	send := func(key, conv string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"y"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		if conv != "" {
			req.Header.Set(ConversationHeader, conv)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("key %s: status %d", key, resp.StatusCode)
		}
		return m.requests[len(m.requests)-1].Conversation
	}
	a, b, a2 := send("key-a", "shared"), send("key-b", "shared"), send("key-a", "shared")
	if a == b || a != a2 || !strings.HasPrefix(a, "v1:key:") || !strings.HasSuffix(a, ":shared") || strings.Contains(a, "key-a") {
		t.Errorf("conversation \"shared\" under key a %q (again %q), under key b %q: want one per key, by the key's id, never the key", a, a2, b)
	}
	anonA, anonB := send("key-a", ""), send("key-b", "")
	if anonA == "" || anonA == anonB || anonA == a {
		t.Errorf("anonymous conversations: key a %q, key b %q; want one of each key's own", anonA, anonB)
	}
}
