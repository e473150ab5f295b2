package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/telemetry"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/access"
)

// Capacity and observability wiring (issue 12): admission from
// server.max_sessions / server.admission, the engine gauges, the admin
// listener with /debug/pprof, and OpenTelemetry export.

// sessionLimits maps server.max_sessions and server.admission onto the
// web server's: auto keeps a ceiling and lets admission measure.
func sessionLimits(c *config.Config) (int, web.AdmissionConfig) {
	a := c.Server.Admission
	adm := web.AdmissionConfig{
		Cores: a.Cores, TargetUtilization: a.TargetUtilization, SessionCPU: a.SessionCPU,
		MaxV2V: a.AdmissionV2V(), MaxCPUWait: a.MaxCPUWait,
	}
	if c.Server.MaxSessions == config.SessionsAuto {
		adm.Auto = true
		return web.AutoSessionCeiling, adm
	}
	return int(c.Server.MaxSessions), adm
}

// observe registers the engine gauges and starts the admin listener and
// the OTLP exporter as configured. stop ends what it started.
func observe(c *config.Config, be pipeline.Backends, ws *web.Server, log zerolog.Logger) (stop func(context.Context), err error) {
	if e, ok := be.LLM.(*engine.Engine); ok {
		ws.Metrics().WatchEngine(func() web.EngineStats {
			s := e.Stats()
			return web.EngineStats{Batch: s.Batch, Queued: s.Queued, KVBytes: s.KVBytes,
				SpecDrafted: s.Spec.Drafted, SpecKept: s.Spec.Accepted}
		})
	}
	var stops []func(context.Context)
	stop = func(ctx context.Context) {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i](ctx)
		}
	}
	if ep := c.Telemetry.OTLPEndpoint; ep != "" {
		exp, err := telemetry.New(ep, c.Telemetry.ServiceName)
		if err != nil {
			return stop, fmt.Errorf("telemetry.otlp_endpoint (%s): %w", c.Origin("telemetry.otlp_endpoint"), err)
		}
		ws.Metrics().AddTurnTracer(exp)
		stops = append(stops, func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := exp.Shutdown(ctx); err != nil {
				log.Warn().Err(err).Msg("telemetry: flushing spans")
			}
		})
		log.Info().Str("endpoint", ep).Msg("telemetry: exporting a span per turn over OTLP/HTTP")
	}
	if addr := c.Server.AdminAddr; addr != "" {
		srv, err := startAdmin(addr, c.Server.AllowedHosts, ws.LimitRejected, log)
		if err != nil {
			stop(context.Background())
			return func(context.Context) {}, fmt.Errorf("server.admin_addr (%s): %w", c.Origin("server.admin_addr"), err)
		}
		stops = append(stops, func(ctx context.Context) { _ = srv.Shutdown(ctx) })
	}
	return stop, nil
}

// startAdmin serves /debug/pprof on its own listener (never on the public
// one: profiles reveal internals and cost CPU). The config keeps addr on
// loopback; the Host check keeps a page on a rebound name (DNS rebinding)
// out too, as on the main listener: it answers to loopback names and
// allowedHosts only. onReject counts a refusal (access.RejectHost).
func startAdmin(addr string, allowedHosts []string, onReject func(limit string), log zerolog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	guard := access.New(access.Config{CheckHost: true, AllowedHosts: allowedHosts, OnReject: onReject})
	// Addr records where it listens (port 0 picks one); Serve uses ln.
	srv := &http.Server{Addr: ln.Addr().String(), Handler: guard.Protect(access.Open, mux, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("admin listener")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msgf("admin: http://%s/debug/pprof/", ln.Addr())
	return srv, nil
}
