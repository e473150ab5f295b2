// Package pipeline is voxpipe's core: a Session turns a client's audio into
// spoken answers (audio → VAD → ASR → turn manager → LLM → chunker → TTS →
// paced audio out) and records every turn's latency trace.
//
// # Stages
//
// Run starts one goroutine per stage, all in one errgroup:
//
//	in ─► audio-in ─► ASR ─► turn manager ─► LLM ─► TTS ─► TTS forwarder ─► pacer ─► out
//	                                 └──► prefill (early start)
//
// The turn manager also receives from audio-in (barge-in speech, client
// events), the LLM stage (deltas, done), the TTS stage (failures) and the
// pacer (a turn's audio ended or was flushed), and sends events and flushes
// to the pacer. Stage by stage:
//
//   - audio-in reads Input. Audio goes through a synchronous chain
//     (resample to 16 kHz → 20 ms framer → VAD) with reused buffers and no
//     allocation per frame; frames in speech go to the ASR stage over a
//     bounded queue and are dropped (Observer.FrameDropped("asr_queue_full"))
//     rather than stall the audio clock. Speech start/end, the VAD pre-roll
//     and client events (playback_start, interrupt, stop) start here.
//   - ASR owns the utterance's asr.Stream: writes frames, drains Results
//     between writes, marks asr_first_partial / asr_final. With
//     Config.PauseFinal it ends the stream at a pause that may end the turn
//     (or has lasted Config.PauseFinalMs) and, if speech resumes, decodes
//     the utterance again from its start.
//   - the turn manager (hub.go) owns the history and each turn's lifecycle.
//   - LLM streams one turn at a time; deltas become answer events, the
//     chunker's pieces become TTS jobs.
//   - TTS calls Synthesize per chunk; the forwarder reads the engine's
//     chunks, resamples them to OutputRate and converts word marks to
//     absolute output samples of the turn.
//   - the pacer is the only writer of out: a frame queue, a 20 ms
//     time.Ticker, OutputLeadMs of lead, the audio/trace/interrupted events.
//   - prefill (only with early start, prefill.go) runs the turn manager's
//     early-start jobs one at a time: llm.Prefiller.Prefill of the request
//     a stable partial transcript would make.
//
// # Early start
//
// With Config.EarlyStart on, a partial that stays unchanged for
// EarlyStartStableMs while no turn is active is prefilled into the LLM's
// cache (history + the partial as the user's message, exactly as the final
// request will be built), so that the final request only processes what
// changed. A newer stable partial cancels the running prefill and replaces
// a waiting one; the final transcript (before its request is queued), a cut
// turn and the session's end cancel it. Prefill failures and llm.ErrBusy
// are logged at debug and ignored. The trace records the request's prompt
// and cached tokens (llm.Usage), the tokens prefilled early and the
// llm_prefill_early mark.
//
// # Turns, barge-in and the history
//
// Each non-empty final transcript starts one turn with its own context
// (child of the session's). Only one turn runs at a time, and a turn's LLM
// request is sent only after the previous turn's assistant message is
// settled. A turn is cut (context cancelled: the LLM and TTS stop, queued
// TTS jobs are dropped, the pacer flushes unsent frames) when the VAD hears
// BargeInMinSpeechMs of speech or a final transcript arrives while it
// generates, sends audio or the client may still be playing it (OutputLeadMs
// after the last frame); when the client sends interrupt; or when a backend
// fails (an error event: backend_error, or busy for llm.ErrBusy).
//
// Backend failures end only the turn. When the LLM fails (or is busy), the
// chunks already handed to the TTS still play, so the person hears whole
// sentences, and the history keeps what was spoken; when the TTS fails the
// turn is cut. ASR failures drop the utterance. The session keeps serving.
//
// The assistant message keeps only what was heard. Every word mark
// (tts.Chunk.Words, plus one at the end of each chunk) is stored as (byte
// offset in the answer, absolute output sample where its audio ends). The
// client's interrupt{played_ms} gives the samples played; the heard text is
// the answer up to the last word that ended by then. After a server-side cut
// the session sends interrupted and waits PlaybackReportTimeout for that
// report; without one it estimates (time since playback_start, else audio
// sent minus the lead) and logs that it did. An answer heard not at all is
// stored as an empty assistant message, so user and assistant messages keep
// alternating. After a backend failure the client was not told to stop, so
// everything sent counts as heard. History is capped at MaxHistoryMessages
// (system prompt not counted) by dropping the oldest user/assistant pairs.
//
// # Events and marks
//
// Per turn the client sees: transcript partials and the final, answer
// deltas and an answer with Final set, the audio event (once per session,
// before the first frame), the frames, interrupted (server-side cuts only),
// and the trace last. The trace's speech_start and speech_end are when the
// person started and stopped speaking by the audio clock (the arrival of the
// frames), not when the VAD became sure StartMs or EndSilenceMs later, so
// voice-to-voice latency (first_audio_out − speech_end) includes the
// endpointing wait. first_audio_out is marked when out has taken the frame.
//
// The pacer sends audio only while a turn speaks and never pads silence
// within a turn, so the client's played_ms counts exactly the samples it was
// sent. Transports that need a continuous stream pad between frames
// themselves.
//
// # Concurrency
//
// Run makes every channel and hands its sending end to exactly one stage,
// which closes it when it returns. Every send selects on the context (or is
// a non-blocking send into a queue with known room); a stage returns when
// its context ends. There is no bare go statement in this package. Run ends
// by cancelling the errgroup: when in closes or the client sends stop the
// audio-in stage returns a private sentinel, which cancels the rest.
//
// The graph has cycles (turn manager ↔ LLM, turn manager ↔ pacer). The turn
// manager never blocks on a send (sendQueue; the prefill job is a single
// replaceable slot offered the same way); every other stage's send to it
// therefore completes, and there is no deadlock. The prefill stage sends
// nothing back: it adds its token count to the utterance's trace. The pacer blocks only on
// out, which the transport must read promptly.
//
// Shared state is limited to: the history (Session.histMu; written by the
// turn manager, read by History), a turn's trace (traceRec.mu; a dozen marks
// per turn from several stages), and the turn's fields, each owned by one
// goroutine at a time and handed over by a channel send (see turn). Buffers
// on the per-frame path are reused; audio handed across a channel changes
// owner and is never touched by the sender again. Output.Audio frames are
// sub-slices of the TTS forwarder's per-chunk buffers, capacity-limited, so
// the transport owns each one.
//
// Observer methods are called from stage goroutines and must not block.
package pipeline
