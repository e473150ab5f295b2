// Package voiceclient is a device-like client of voxpipe's /ws voice
// protocol (docs/protocol.md): it streams speech as microphone audio in real
// time, "plays" the answers as they arrive, and reports every turn with the
// latency a listener has: heard_ms, from the last speech sample sent to the
// first audible answer sample played.
//
// Run streams a whole recording and returns each turn's result. The
// measuring part, Meter, knows nothing of the wire, so other device
// protocols (xiaozhi) measure the same way.
//
// Audibility is pipeline/audio's definition (AudibleDBFS over
// AudibleWindowMs windows) on both sides: the end of speech is the end of
// the last audible stretch sent by the server's speech_end (from the trace:
// when the final transcript arrived minus its asr_final mark, plus 150 ms of
// slack); the answer is heard from its first audible window.
//
// # Cost
//
// A session costs one reader and one writer goroutine, a 20 ms ticker and
// no allocation per audio frame (buffers are reused; the answer audio is
// kept only with Config.KeepAudio), so a load generator can run many.
package voiceclient
