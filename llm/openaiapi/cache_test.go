package openaiapi

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

func answerOf(t *testing.T, body io.Reader) string {
	t.Helper()
	var got struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(body).Decode(&got); err != nil || len(got.Choices) != 1 {
		t.Fatalf("response: %v, %+v", err, got)
	}
	return got.Choices[0].Message.Content
}

// TestAnswerCacheOptIn: with Limits.Answers, a request that opts in is
// answered by the model once and from the cache for a paraphrase (header
// X-Voxpipe-Cache: hit, streamed or not); a request that does not opt in,
// or asks what the cache must not answer, goes to the model.
func TestAnswerCacheOptIn(t *testing.T) {
	m := &scriptedModel{pieces: []string{"Paris", "."}, usage: &llm.Usage{CompletionTokens: 2}}
	lim := Limits{Answers: &Answers{Cache: answercache.New(answercache.Config{}), Scope: answercache.Scope{Model: "voxpipe-test"}}}
	srv := httptest.NewServer(NewWithLimits(m, "voxpipe-test", zerolog.Nop(), lim))
	t.Cleanup(srv.Close)
	ask := func(q string, optIn, stream bool) (string, string) {
		body, _ := json.Marshal(map[string]any{
			"messages":      []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}},
			"voxpipe_cache": optIn, "stream": stream,
		})
		resp := post(t, srv, string(body))
		if stream {
			b, _ := io.ReadAll(resp.Body)
			return resp.Header.Get(CacheHeader), string(b)
		}
		return resp.Header.Get(CacheHeader), answerOf(t, resp.Body)
	}
	if h, a := ask("what is the capital of france", true, false); h != "miss" || a != "Paris." {
		t.Fatalf("first: header %q answer %q, want a miss answered Paris.", h, a)
	}
	if h, a := ask("tell me the capital of france", true, false); h != "hit" || a != "Paris." {
		t.Errorf("paraphrase: header %q answer %q, want a hit answered Paris.", h, a)
	}
	if h, s := ask("france's capital?", true, true); h != "hit" || !strings.Contains(s, `"content":"Paris."`) || !strings.Contains(s, "[DONE]") {
		t.Errorf("streamed paraphrase: header %q body %q, want a hit streaming Paris.", h, s)
	}
	if h, _ := ask("what is the capital of france", false, false); h != "" {
		t.Errorf("without opting in: header %q, want none", h)
	}
	if h, _ := ask("what time is it", true, false); h != "bypass" {
		t.Errorf("a time question: header %q, want bypass", h)
	}
	if n := len(m.requests); n != 3 {
		t.Errorf("the model got %d requests, want 3 (the first, the one not opted in, the time question)", n)
	}
	if st := lim.Answers.Cache.Stats(); st.Entries != 1 {
		t.Errorf("cache holds %d answers, want 1", st.Entries)
	}
}
