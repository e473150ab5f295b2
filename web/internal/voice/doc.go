// Package voice is the transport-neutral half of a voice session: what the
// WebSocket (/ws), WebRTC, xiaozhi and LiveKit agent transports all do the
// same way. A transport is a thin framer around it: it moves bytes on its
// own wire and asks this package to
//
//   - apply the control-message rules of docs/protocol.md (Rules: one start
//     per session, control events only while the session runs;
//     NegotiatedRules where the format was negotiated before the session),
//   - turn received audio into pipeline input (Uplink: Opus or PCM16 decoded
//     into a ring of reused buffers, queued without blocking, drops counted),
//   - turn the session's 20 ms output frames into wire packets (Downlink:
//     Opus packets of the transport's frame length, or PCM16 bytes),
//   - pace Opus answer audio to wall time on an RTP track, with silence
//     between answers (Paced: WebRTC and the LiveKit agent),
//   - start and run the pipeline session (Start, Run: bad formats and
//     configs map to bad_format, a panic becomes an error).
//
// Nothing here allocates per audio frame in steady state.
package voice
