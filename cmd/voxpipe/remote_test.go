package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/testenv"
)

func TestMissingCredentialsNameTheVariable(t *testing.T) {
	t.Setenv("ARK_API_KEY", "")
	t.Setenv("VOLC_ACCESS_TOKEN", "")
	t.Setenv("VOLC_APP_ID", "")
	for _, tc := range []struct {
		set  func(c *config.Config)
		want string
	}{
		{func(c *config.Config) { c.LLM.Backend, c.LLM.Ark.Model = "ark", "ep-1" }, "llm ark: llm.backend ark needs credentials: the environment variable ARK_API_KEY is not set"},
		{func(c *config.Config) { c.ASR.Backend, c.ASR.Volc.AppID = "volc", "app-1" }, "the environment variable VOLC_ACCESS_TOKEN is not set"},
		{func(c *config.Config) { c.ASR.Backend = "volc" }, "the environment variable VOLC_APP_ID is not set"},
		{func(c *config.Config) { c.TTS.Backend, c.TTS.Volc.AppID = "volc", "app-1" }, "tts volc: tts.backend volc needs credentials: the environment variable VOLC_ACCESS_TOKEN"},
	} {
		cfg := config.Default()
		cfg.LLM.Backend, cfg.ASR.Backend, cfg.TTS.Backend = "openai", "openai", "openai"
		tc.set(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		_, _, err := openBackends(&cfg, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("have %v, want one line containing %q", err, tc.want)
		}
	}
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRemoteSecretsNeverLogged serves with all three stages remote and the
// keys in the environment, at debug level, while the upstream LLM refuses
// the key and echoes it back: the key is sent upstream, and appears in no
// log line and no answer.
func TestRemoteSecretsNeverLogged(t *testing.T) {
	const secret = "sk-voxpipe-test-9f3a7c"
	t.Setenv("VOXPIPE_TEST_KEY", secret)
	var got sync.Map
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store("auth", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	defer upstream.Close()
	cfg := config.Default()
	for _, kv := range [][2]string{
		{"server.addr", "127.0.0.1:0"}, {"log.level", "debug"},
		{"llm.backend", "openai"}, {"llm.openai.base_url", upstream.URL + "/v1"}, {"llm.openai.api_key_env", "VOXPIPE_TEST_KEY"},
		{"asr.backend", "openai"}, {"asr.openai.base_url", upstream.URL + "/v1"}, {"asr.openai.api_key_env", "VOXPIPE_TEST_KEY"},
		{"tts.backend", "openai"}, {"tts.openai.base_url", upstream.URL + "/v1"}, {"tts.openai.api_key_env", "VOXPIPE_TEST_KEY"},
		// the end-of-turn model is local whatever the backends
		{"pipeline.turn.model", filepath.Join(testenv.RepoRoot(t), "models", "voxpipe-eou-q8_0.gguf")},
	} {
		if err := cfg.Set(kv[0], kv[1], "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	addrc := make(chan net.Addr, 1)
	onListening = func(a net.Addr) { addrc <- a }
	defer func() { onListening = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, &cfg, log) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	}
	resp, err := http.Post("http://"+addr.String()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"openai","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v", err)
	}
	if a, _ := got.Load("auth"); a != "Bearer "+secret {
		t.Fatalf("upstream got Authorization %q", a)
	}
	if !strings.Contains(string(body), "HTTP 401") {
		t.Fatalf("the client was not told why: %s", body)
	}
	all := logs.String() + string(body)
	if strings.Contains(all, secret) {
		t.Fatalf("the key appears in the logs or the answer:\n%s", all)
	}
	if !strings.Contains(logs.String(), "[api key]") {
		t.Fatalf("the upstream's refusal is not in the logs:\n%s", logs.String())
	}
}
