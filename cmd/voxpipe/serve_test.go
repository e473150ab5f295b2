package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/tooleval"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
	"github.com/voxpipe/voxpipe/pipeline"
)

// chdirRoot runs the test from the repository root, where the default
// config path and the model path in it resolve.
func chdirRoot(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", ".."))
	if _, err := os.Stat(defaultConfigPath); err != nil {
		t.Skipf("default config not found from the repository root: %v", err)
	}
}

func TestLoadConfigDefaultWithOverrides(t *testing.T) {
	chdirRoot(t)
	cfg, err := loadConfig(defaultConfigPath, "127.0.0.1:9999", []string{"pipeline.vad.end_silence_ms=400", "tts.backend=espeak"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Addr != "127.0.0.1:9999" || cfg.Pipeline.VAD.EndSilenceMs != 400 || cfg.TTS.Backend != "espeak" {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	pc := pipelineConfig(cfg)
	if pc.VAD.EndSilenceMs != 400 || pc.PlaybackReportTimeout != 500*time.Millisecond || pc.SystemPrompt != cfg.Pipeline.SystemPrompt {
		t.Fatalf("pipeline config %+v", pc)
	}
	if id := modelID(cfg); id != "voxpipe-demo-q8_0" {
		t.Fatalf("model id %q", id)
	}
}

func TestEarlyStartConfigMapped(t *testing.T) {
	chdirRoot(t)
	cfg, err := loadConfig(defaultConfigPath, "", []string{"pipeline.early_start=off", "pipeline.early_start_stable_ms=300"})
	if err != nil {
		t.Fatal(err)
	}
	if pc := pipelineConfig(cfg); pc.EarlyStart != pipeline.EarlyStartOff || pc.EarlyStartStableMs != 300 {
		t.Fatalf("early start %q, %d ms; want off, 300 ms", pc.EarlyStart, pc.EarlyStartStableMs)
	}
	cfg, err = loadConfig(defaultConfigPath, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pc := pipelineConfig(cfg); pc.EarlyStart != pipeline.EarlyStartAuto {
		t.Fatalf("default early start %q, want auto", pc.EarlyStart)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	chdirRoot(t)
	cases := []struct {
		sets []string
		want string
	}{
		{[]string{"asr.backend=kaldi"}, `flag --set asr.backend: asr.backend "kaldi": not built into this binary (known: openai, sphinx, volc)`},
		{[]string{"tts.backend=say"}, `(known: espeak, flite, openai, volc)`},
		{[]string{"pipeline.vad.end_silence_ms=5"}, "pipeline.vad.end_silence_ms: must be 100..10000 (got 5)"},
		{[]string{"pipeline.nope=1"}, `no setting "pipeline.nope"`},
		{[]string{"novalue"}, `want key=value`},
	}
	for _, tc := range cases {
		_, err := loadConfig(defaultConfigPath, "", tc.sets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %q: have %v, want an error containing %q", tc.sets, err, tc.want)
		}
	}
	if _, err := loadConfig(defaultConfigPath, "nohost", nil); err == nil || !strings.Contains(err.Error(), "flag --addr: server.addr") {
		t.Errorf("bad --addr: have %v", err)
	}
}

func TestUnknownBackendRefusesToStart(t *testing.T) {
	cfg := config.Default()
	cfg.LLM.Backend = "gemini"
	_, _, err := openBackends(&cfg, zerolog.Nop())
	if !errors.Is(err, errBackend) || !strings.Contains(err.Error(), "known: ark, engine, openai") {
		t.Fatalf("have %v, want errBackend listing engine", err)
	}
}

func TestRunCommands(t *testing.T) {
	if err := run(t.Context(), []string{"version"}); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"dance"}); !errors.Is(err, errCommandLine) {
		t.Fatalf("unknown command: have %v", err)
	}
	if err := run(t.Context(), nil); !errors.Is(err, errCommandLine) {
		t.Fatalf("no command: have %v", err)
	}
	if err := run(t.Context(), []string{"serve", "extra"}); !errors.Is(err, errCommandLine) {
		t.Fatalf("serve with an argument: have %v", err)
	}
	if err := run(t.Context(), []string{"eval"}); !errors.Is(err, errCommandLine) {
		t.Fatalf("eval without an evaluation: have %v", err)
	}
	// eval tools is internal/tooleval's: a missing --file is its usage error.
	if err := run(t.Context(), []string{"eval", "tools"}); !errors.Is(err, tooleval.ErrUsage) || !strings.Contains(err.Error(), "--file") {
		t.Fatalf("eval tools without --file: have %v", err)
	}
}

// TestServeStopsGracefully runs the real server (all three engines) and
// stops it the way SIGINT does: a live voice session gets a 1001 close and
// serve returns nil.
func TestServeStopsGracefully(t *testing.T) {
	chdirRoot(t)
	cfg, err := loadConfig(defaultConfigPath, "127.0.0.1:0", []string{"log.level=warn"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.LLM.Engine.Model); err != nil {
		t.Skipf("bundled model missing: %v", err)
	}
	addrc := make(chan net.Addr, 1)
	onListening = func(a net.Addr) { addrc <- a }
	defer func() { onListening = nil }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, zerolog.Nop()) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-served:
		t.Skipf("server did not start (engines unavailable?): %v", err)
	}

	for _, path := range []string{"/healthz", "/v1/models", "/metrics"} {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr.String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "start", "sample_rate": 16000}); err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	if err := ws.ReadJSON(&ready); err != nil || ready["type"] != "ready" {
		t.Fatalf("have %v %v, want ready", ready, err)
	}

	cancel() // what SIGINT does
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("have %v, want close 1001", err)
		}
		break
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestToolsNeedToolTemplate: tools on with an in-process model whose chat
// template has no tool-call convention would fail every turn; the server
// refuses to start and says what to change.
func TestToolsNeedToolTemplate(t *testing.T) {
	chdirRoot(t)
	cfg, err := loadConfig(defaultConfigPath, "127.0.0.1:0", []string{"tools.enabled=true", "llm.engine.chat_template=gemma"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.LLM.Engine.Model); err != nil {
		t.Skipf("bundled model missing: %v", err)
	}
	_, _, err = openBackends(cfg, zerolog.Nop())
	if !errors.Is(err, chat.ErrNoTools) || !strings.Contains(err.Error(), "tools.enabled") {
		t.Fatalf("have %v, want chat.ErrNoTools naming tools.enabled", err)
	}
}
