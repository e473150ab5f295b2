package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/web"
)

// errShuttingDown is the cause given to requests still running at the
// shutdown deadline (a /v1 stream gets it as an error event).
var errShuttingDown = errors.New("server shutting down")

// cutGrace is how long requests cut at the deadline get to end.
const cutGrace = time.Second

// shutdown stops a serving server:
//  1. With drain > 0 (server.drain_timeout): new sessions get 503 and
//     /healthz says draining, while running sessions go on until they end
//     or drain has passed.
//  2. Voice sessions are told going_away (1001) and, at the same time,
//     http.Server.Shutdown stops the listener and waits for plain requests
//     (/v1 streams), both on one budget of shutdownTimeout.
//  3. At that deadline requests still running are cancelled with
//     errShuttingDown and their connections closed.
//
// cancelRequests cancels the context every request's context derives from
// (http.Server.BaseContext). ctx carries values only (serve's, without its
// cancel: it has ended when shutdown runs).
func shutdown(ctx context.Context, httpSrv *http.Server, ws *web.Server, cancelRequests context.CancelCauseFunc, drain time.Duration, log zerolog.Logger) error {
	if drain > 0 {
		ws.Drain()
		log.Info().Dur("drain_timeout", drain).Msg("draining: new sessions refused, running ones go on")
		dctx, cancel := context.WithTimeout(ctx, drain)
		err := ws.WaitIdle(dctx)
		cancel()
		if err != nil {
			log.Info().Int("sessions", ws.ActiveSessions()).Msg("drain deadline passed: telling sessions going_away")
		}
	}
	sctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	var httpErr, wsErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// WebSockets are hijacked: http.Server.Shutdown does not wait for
		// them, web.Server.Shutdown cancels and closes them itself.
		wsErr = ws.Shutdown(sctx)
	}()
	go func() {
		defer wg.Done()
		if httpErr = httpSrv.Shutdown(sctx); httpErr != nil {
			// Cut what still runs, give the handlers a moment to tell
			// their clients why, then close what is left.
			cancelRequests(errShuttingDown)
			gctx, gcancel := context.WithTimeout(ctx, cutGrace)
			defer gcancel()
			if httpSrv.Shutdown(gctx) != nil {
				httpErr = errors.Join(httpErr, httpSrv.Close())
			}
		}
	}()
	wg.Wait()
	cancelRequests(errShuttingDown)
	return errors.Join(httpErr, wsErr)
}
