package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/logging"
	"github.com/voxpipe/voxpipe/internal/record"
	"github.com/voxpipe/voxpipe/llm/openaiapi"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

const (
	defaultConfigPath = "configs/default.yaml"
)

// shutdownTimeout bounds the graceful stop (after any drain): requests and
// sessions still running after it are cut. A variable for tests.
var shutdownTimeout = 10 * time.Second

// onListening, when set (by tests), is told the bound address.
var onListening func(net.Addr)

// setFlags collects repeated --set key=value overrides.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	configPath := fs.String("config", defaultConfigPath, "YAML config file")
	addr := fs.String("addr", "", "listen address HOST:PORT (overrides server.addr; default 127.0.0.1:8080)")
	var sets setFlags
	fs.Var(&sets, "set", "override one config key, e.g. --set pipeline.vad.end_silence_ms=400 (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: voxpipe serve [--config F] [--addr HOST:PORT] [--set key=value ...]")
		fs.PrintDefaults()
	}
	if help, err := parseCommand(fs, args); help || err != nil {
		return err
	}
	cfg, log, err := startUp(*configPath, *addr, sets)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, log)
}

// parseCommand parses a subcommand's flags. help is true after --help (the
// usage is printed, nothing more to do); a bad flag or any positional
// argument is an errCommandLine.
func parseCommand(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%w: %s takes no arguments (got %q)", errCommandLine, fs.Name(), fs.Args())
	}
	return false, nil
}

// startUp loads the config (loadConfig) and builds the logger it asks for.
func startUp(path, addr string, sets []string) (*config.Config, zerolog.Logger, error) {
	cfg, err := loadConfig(path, addr, sets)
	if err != nil {
		return nil, zerolog.Logger{}, err
	}
	log, err := logging.New(os.Stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, zerolog.Logger{}, err
	}
	return cfg, log, nil
}

// openWithKnowledge opens the config's backends and, with knowledge on,
// puts its index in front of the LLM. The closers close them all.
func openWithKnowledge(cfg *config.Config, log zerolog.Logger) (pipeline.Backends, []io.Closer, error) {
	be, closers, err := openBackends(cfg, log)
	if err != nil {
		return be, nil, err
	}
	be.LLM, closers = withKnowledge(cfg, be.LLM, closers, log) //nolint:contextcheck // the index build is stopped by its closer
	return be, closers, nil
}

// closeBackends closes what openWithKnowledge opened, in reverse, logging
// a failure.
func closeBackends(closers []io.Closer, log zerolog.Logger) {
	if err := closeAll(closers); err != nil {
		log.Warn().Err(err).Msg("closing backends")
	}
}

// loadConfig builds the config: defaults → file → flags → Validate.
func loadConfig(path, addr string, sets []string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && path == defaultConfigPath {
			return nil, fmt.Errorf("%w (run from the repository root, or pass --config)", err)
		}
		return nil, err
	}
	if addr != "" {
		if err := cfg.Set("server.addr", addr, "flag --addr"); err != nil {
			return nil, err
		}
	}
	for _, kv := range sets {
		key, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --set %q: want key=value", errCommandLine, kv)
		}
		if err := cfg.Set(strings.TrimSpace(key), value, "flag --set "+key); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkBackendNames(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func serve(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	started := time.Now()
	acc, err := accessConfig(cfg, log)
	if err != nil {
		return err
	}
	stopMalloc := tuneMalloc(ctx, cfg.Server.Malloc, log)
	defer stopMalloc()
	be, closers, err := openWithKnowledge(cfg, log)
	if err != nil {
		return err
	}
	defer closeBackends(closers, log)
	be.Answers = openAnswerCache(ctx, cfg, closers, log)
	pc := pipelineConfig(cfg)
	// Checked once here, so that "on" with a backend that cannot prefill
	// stops the server now rather than failing every session.
	prefiller, err := pc.EarlyStart.Prefiller(be.LLM)
	if err != nil {
		return fmt.Errorf("pipeline.early_start (%s): %w", cfg.Origin("pipeline.early_start"), err)
	}
	log.Info().Str("asr", cfg.ASR.Backend).Str("llm", cfg.LLM.Backend).Str("tts", cfg.TTS.Backend).
		Bool("early_start", prefiller != nil).Int("gomaxprocs", runtime.GOMAXPROCS(0)).Dur("load", time.Since(started)).Msg("backends ready")

	id := modelID(cfg)
	maxSessions, admission := sessionLimits(cfg)
	apiLim := apiLimits(cfg.Server.API)
	var ws *web.Server
	apiLim.OnReject = apiRejections(&ws)
	apiLim.Answers = apiAnswers(be.Answers)
	var rec *record.Recorder
	if rc := cfg.Server.Record; rc.Enabled {
		if rec, err = record.New(record.Config{Dir: rc.Dir, MaxRecordings: rc.MaxRecordings, MaxBytes: rc.MaxBytes, MaxAge: rc.MaxAge},
			log.With().Str("component", "record").Logger()); err != nil {
			return fmt.Errorf("server.record (%s): %w", cfg.Origin("server.record.dir"), err)
		}
		log.Info().Str("dir", rc.Dir).Msg("recording every session")
	}
	ws, err = web.New(web.Config{
		MaxSessions:   maxSessions,
		Admission:     admission,
		MaxFrameBytes: cfg.Server.MaxFrameBytes,
		IdleTimeout:   cfg.Server.IdleTimeout,
		RTC:           rtcConfig(cfg.Server.RTC),
		Xiaozhi:       xiaozhiConfig(cfg.Server.Xiaozhi, cfg.Tools.Enabled),
		Pipeline:      pc,
		API:           openaiapi.NewWithLimits(be.LLM, id, log.With().Str("component", "openaiapi").Logger(), apiLim),
		Access:        acc,
		MaxSession:    cfg.Server.Limits.MaxSession,
		StartTimeout:  cfg.Server.Limits.StartTimeout,
		Recorder:      rec,
		Resume:        web.ResumeConfig{TTL: cfg.Server.Resume.TTL, MaxParked: cfg.Server.Resume.MaxParked},
	}, be, log.With().Str("component", "web").Logger())
	if err != nil {
		return err
	}
	watchMalloc(ws.Metrics().Registry())
	if err := startAnswerCache(ctx, cfg, be.Answers, be, pc, ws.Metrics().Registry(), log); err != nil {
		_ = ws.Shutdown(context.WithoutCancel(ctx))
		return err
	}
	for name, e := range map[string]any{"asr": be.ASR, "tts": be.TTS} {
		if r, ok := e.(interface{ Replaced() int }); ok {
			ws.Metrics().WatchReplacements(name, r.Replaced)
		}
	}
	stopObserving, err := observe(cfg, be, ws, log) //nolint:contextcheck // exporters and the admin server live until stopObserving
	if err != nil {
		_ = ws.Shutdown(context.WithoutCancel(ctx))
		return err
	}
	defer stopObserving(context.WithoutCancel(ctx))
	reqCtx, cancelRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRequests(nil)
	httpSrv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		Addr:              cfg.Server.Addr,
		Handler:           ws.Handler(),
		ReadHeaderTimeout: cfg.Server.Limits.HeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		// No WriteTimeout: it would cut every /v1 stream and slow answer at
		// that age. The web server gives each write its own deadline
		// instead (web.Server.Handler), which ends a client that stops
		// reading.
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (server.addr from %s): %w", cfg.Server.Addr, cfg.Origin("server.addr"), err)
	}
	log.Info().Str("addr", ln.Addr().String()).Str("model", id).
		Msgf("voxpipe listening: ws://%s/ws, http://%s/metrics", ln.Addr(), ln.Addr())
	if onListening != nil {
		onListening(ln.Addr())
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()

	select {
	case err := <-serveErr:
		_ = ws.Shutdown(context.WithoutCancel(ctx))
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("stopping: finishing requests and closing sessions")
	stopErr := shutdown(context.WithoutCancel(ctx), httpSrv, ws, cancelRequests, cfg.Server.DrainTimeout, log)
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("http server")
	}
	if stopErr != nil {
		log.Warn().Err(stopErr).Msg("unclean stop")
	}
	log.Info().Msg("stopped")
	return nil
}

// xiaozhiConfig maps server.xiaozhi onto the device endpoints; nil when off.
func xiaozhiConfig(c config.Xiaozhi, toolsOn bool) *xiaozhi.Config {
	if !c.Enabled {
		return nil
	}
	xc := xiaozhi.DefaultConfig()
	xc.OTAPath, xc.WSPath, xc.WebSocketURL, xc.Token = c.OTAPath, c.WSPath, c.WebSocketURL, c.Token
	xc.ProtocolVersion, xc.Devices, xc.AllowedDevices = c.ProtocolVersion, c.Devices, c.AllowedDevices
	xc.OutputRate, xc.HelloTimeout, xc.TTSStartLead = c.OutputRate, c.HelloTimeout, c.TTSStartLead
	xc.IdleTimeout, xc.Emotion = c.IdleTimeout, c.Emotion
	// Device tools are tools: with tools.enabled off a turn gets none of
	// them either, and the device is not asked for its list.
	xc.DeviceTools, xc.MCPTimeout, xc.MCPListWait = c.DeviceTools && toolsOn, c.MCPTimeout, c.MCPListWait
	xc.VisionURL, xc.VisionToken = c.VisionURL, c.VisionToken
	return &xc
}

// rtcConfig maps the server.rtc section onto the WebRTC transport's config.
func rtcConfig(c config.RTC) web.RTCConfig {
	rc := web.RTCConfig{
		UDPPortMin:      c.UDPPortMin,
		UDPPortMax:      c.UDPPortMax,
		IncludeLoopback: c.IncludeLoopback,
		ConnectTimeout:  c.ConnectTimeout,
		FailedTimeout:   c.FailedTimeout,
	}
	for _, s := range c.ICEServers {
		rc.ICEServers = append(rc.ICEServers, web.ICEServer{URLs: s.URLs, Username: s.Username, Credential: s.Credential})
	}
	return rc
}

// apiLimits maps server.api onto the /v1 handler's limits.
func apiLimits(c config.APILimits) openaiapi.Limits {
	return openaiapi.Limits{MaxBodyBytes: c.MaxBodyBytes, MaxMessages: c.MaxMessages, MaxStops: c.MaxStops, MaxTokens: c.MaxTokens}
}
