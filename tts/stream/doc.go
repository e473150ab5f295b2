// Package stream shapes the audio of one synthesis on its way from a TTS
// engine to the pipeline, the same way for every backend:
//
//   - the leading silence of the synthesis is dropped, so its first chunk is
//     audible from (within one audibility window of) its first sample;
//   - every run of silence inside it, and the trailing one that forms the
//     pause at the join with the next synthesis, is cut to MaxPause;
//   - word marks move by exactly the audio removed before them.
//
// Silence and audibility are pipeline/audio's definition (AudibleDBFS over
// AudibleWindowMs windows). Audio is never copied: kept runs go out as
// sub-slices of the engine's buffers.
//
// A backend writes each engine callback into a Writer. Backends whose
// engine is process-wide and locked (flite, espeak) use Buffered, which
// queues the chunks the engine makes under its lock and delivers them from
// a goroutine of its own, so a consumer that stops reading never holds the
// engine; backends without such a lock hand NewWriter a sink that sends.
package stream

import "time"

// MaxPause is the longest silence kept anywhere in a synthesis: about a
// natural pause at a comma or between sentences. Longer engine pauses (flite
// ends each utterance with 150-250 ms of silence and starts the next with
// as much) only delay what the listener hears next.
const MaxPause = 150 * time.Millisecond
