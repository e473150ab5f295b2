// Package web is voxpipe's HTTP front: the voice WebSocket (GET /ws, protocol
// in docs/protocol.md), WebRTC (POST /rtc/offer: Opus both ways, the same
// events on the "events" data channel), the browser page (/, embedded from
// web/ui), /healthz, /metrics (Prometheus) and the OpenAI-compatible API
// mounted under /v1/; with Config.Xiaozhi, the ESP32 xiaozhi device endpoints
// (web/xiaozhi: OTA and the device WebSocket, docs/xiaozhi.md), which check
// their own device token instead of the API keys. All voice transports share
// MaxSessions.
//
// # Concurrency
//
// Each WebSocket connection is served by the HTTP handler goroutine, which
// runs the connection's only reader (gorilla/websocket allows one reader and
// one writer), and owns two more goroutines: the only writer, and the
// pipeline session (pipeline.Session.Run) once the client has sent start.
//
//	reader ──in──► session ──out──► writer
//	   └──────────ctrl (ready, errors)──┘
//
// The reader creates nothing it does not close: it closes in and ctrl when
// it returns; the session goroutine closes out when Run returns (the handler
// closes it when no session was started). Whatever ends first cancels the
// connection's context: the writer then sends a close frame, the reader's
// deadline is cut to a short grace period for the client's close reply, and
// the session returns. The handler returns only after all three have exited.
//
// Every transport is a thin framer over web/internal/voice, which holds what
// they share: the control-message rules (one start per session), Opus/PCM16
// decoding into reused buffers, answer encoding, session start and run.
// Sessions report to Metrics through a per-transport observer
// (transport.go), so voxpipe_transport_* series carry a transport label.
//
// A WebRTC session (rtc.go) is driven by pion's callbacks: the audio track's
// reader and the data channel's messages feed the session, one goroutine
// writes its output (events to the data channel, Opus to the track, silence
// between answers), and the peer connection failing or closing cancels it.
//
// Server.Shutdown does what http.Server.Shutdown cannot for hijacked
// connections: it cancels every session, closes every WebSocket and waits.
package web
