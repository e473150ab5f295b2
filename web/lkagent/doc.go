// Package lkagent runs voxpipe's voice pipeline as a LiveKit agent worker.
//
// A Worker holds one WebSocket to a LiveKit server's /agent endpoint and
// speaks LiveKit's agent worker protocol (livekit.WorkerMessage and
// livekit.ServerMessage, protobuf): it registers, answers availability
// requests (yes while it has a free job slot, no when full or draining),
// and for each assignment joins the room with the token the server
// minted. A job subscribes to the first remote participant's microphone
// track (Opus), runs one pipeline.Session on it exactly as the WebRTC
// transport does (web/internal/voice: same uplink, rules and session
// runner, so the same trace, barge-in and end of turn), publishes the
// answer as an Opus audio track and sends the session's events (ready,
// transcripts, answers, trace) as JSON data packets on the topic
// EventsTopic. A participant sends playback_start, interrupt and stop as
// JSON data packets on ControlTopic, the messages of docs/protocol.md.
// Pauses a browser sends as Opus DTX (a packet every 400 ms or so) reach
// the session as the silence they stand for, as they pass, so the end of
// speech is not held back.
//
// After every job start and end the worker reports its load (jobs /
// MaxJobs) and WS_FULL at capacity, so the server dispatches elsewhere.
// Drain (Run's ctx ending) reports WS_FULL, refuses every new job, lets the
// running conversations go on until they end or Config.DrainTimeout
// passes, then ends each one between turns: a turn in flight is answered
// to its last frame before the agent leaves the room.
//
// Concurrency: Run owns the control connection's reader; writes to it are
// serialised by a mutex (one concurrent writer, as gorilla/websocket
// requires). Each job runs in a goroutine Run starts and waits for; the
// LiveKit SDK's callbacks (track subscribed, data received, disconnect)
// only hand work to the job through channels and its context.
package lkagent
