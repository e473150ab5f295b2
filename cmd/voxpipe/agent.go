package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/lkagent"
)

// agentFlags are voxpipe agent's settings beyond the config file: where
// the LiveKit server is and how the worker presents itself.
type agentFlags struct {
	url, apiKey, apiSecret, agentName string
	maxJobs                           int
	drain                             time.Duration // -1: server.drain_timeout
	healthAddr                        string
}

// runAgent serves the pipeline as a LiveKit agent worker: the config's
// backends and pipeline settings, the LiveKit server from flags or the
// LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET variables (the
// names LiveKit's own tools read).
func runAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	configPath := fs.String("config", defaultConfigPath, "YAML config file (backends, pipeline, log)")
	var af agentFlags
	fs.StringVar(&af.url, "url", os.Getenv("LIVEKIT_URL"), "LiveKit server, ws(s):// or http(s):// (default $LIVEKIT_URL)")
	fs.StringVar(&af.apiKey, "api-key", os.Getenv("LIVEKIT_API_KEY"), "LiveKit API key (default $LIVEKIT_API_KEY)")
	fs.StringVar(&af.apiSecret, "api-secret", "", "LiveKit API secret (default $LIVEKIT_API_SECRET; a flag shows in ps)")
	fs.StringVar(&af.agentName, "agent-name", "", "register under this name: only dispatches naming it reach the worker (default: every new room)")
	fs.IntVar(&af.maxJobs, "max-jobs", 0, "conversations held at once; at that many the worker reports full (default server.max_sessions, or 4 when auto)")
	drain := fs.String("drain", "", "on SIGTERM, how long running conversations may go on before each is ended after its turn, e.g. 30s (default server.drain_timeout)")
	fs.StringVar(&af.healthAddr, "health-addr", "", "serve /healthz (ok or draining) and /metrics on HOST:PORT (default: none)")
	var sets setFlags
	fs.Var(&sets, "set", "override one config key, e.g. --set pipeline.vad.end_silence_ms=400 (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: voxpipe agent [--config F] [--url URL --api-key K] [--agent-name N] [--max-jobs N] [--health-addr HOST:PORT] [--set key=value ...]")
		fs.PrintDefaults()
	}
	if help, err := parseCommand(fs, args); help || err != nil {
		return err
	}
	af.drain = -1
	if *drain != "" {
		d, err := time.ParseDuration(*drain)
		if err != nil || d < 0 {
			return fmt.Errorf("%w: --drain %q: want a duration such as 30s", errCommandLine, *drain)
		}
		af.drain = d
	}
	if af.apiSecret == "" {
		af.apiSecret = os.Getenv("LIVEKIT_API_SECRET")
	}
	if af.url == "" || af.apiKey == "" || af.apiSecret == "" {
		return fmt.Errorf("%w: agent needs the LiveKit server: --url, --api-key and LIVEKIT_API_SECRET (or the LIVEKIT_* variables)", errCommandLine)
	}
	cfg, log, err := startUp(*configPath, "", sets)
	if err != nil {
		return err
	}
	return agent(ctx, cfg, af, log)
}

func agent(ctx context.Context, cfg *config.Config, af agentFlags, log zerolog.Logger) error {
	be, closers, err := openWithKnowledge(cfg, log)
	if err != nil {
		return err
	}
	defer closeBackends(closers, log)
	pc := pipelineConfig(cfg)
	if _, err := pc.EarlyStart.Prefiller(be.LLM); err != nil {
		return fmt.Errorf("pipeline.early_start (%s): %w", cfg.Origin("pipeline.early_start"), err)
	}
	maxJobs := af.maxJobs
	if maxJobs == 0 && cfg.Server.MaxSessions != config.SessionsAuto {
		maxJobs = int(cfg.Server.MaxSessions)
	}
	drain := af.drain
	if drain < 0 {
		drain = cfg.Server.DrainTimeout
	}
	metrics := web.NewMetrics()
	w, err := lkagent.New(lkagent.Config{
		URL: af.url, APIKey: af.apiKey, APISecret: af.apiSecret, AgentName: af.agentName,
		MaxJobs: maxJobs, DrainTimeout: drain, Pipeline: pc, Version: version,
		Observer: func(session string) pipeline.Observer { return metrics.ForSession(session, metrics) },
	}, be, log.With().Str("component", "livekit").Logger())
	if err != nil {
		return err
	}
	if af.healthAddr != "" {
		stop, err := serveAgentHealth(ctx, af.healthAddr, w, metrics, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info().Str("url", af.url).Str("agent_name", af.agentName).Msg("voxpipe agent: registering with LiveKit")
	err = w.Run(ctx)
	log.Info().Msg("stopped")
	return err
}

// serveAgentHealth serves the worker's /healthz and the metrics on addr
// until stop.
func serveAgentHealth(ctx context.Context, addr string, w *lkagent.Worker, m *web.Metrics, log zerolog.Logger) (stop func(), err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent --health-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", w)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("agent health server")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("agent health: /healthz, /metrics")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
