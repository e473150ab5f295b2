// Package audio holds the pipeline's pure-Go audio helpers: a streaming
// polyphase resampler, a framer that cuts arbitrary writes into fixed
// frames, an energy VAD with an adaptive noise floor and pre-roll, WAV
// reading and writing, and thin Opus wrappers over github.com/hraban/opus.
//
// All audio is PCM16 (int16). The per-frame types (Resampler, Framer, VAD)
// do not allocate in steady state when callers pass buffers with enough
// capacity.
//
// # Concurrency
//
// None of the types is safe for concurrent use: each belongs to one
// goroutine (one pipeline stage). Immutable resampler filter tables are
// shared between Resamplers of the same rate pair; that sharing is safe.
package audio
