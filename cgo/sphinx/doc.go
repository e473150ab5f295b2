// Package sphinx is a small cgo binding to pocketsphinx 0.8 (Debian's
// libpocketsphinx, the pre-5.0 API): one Decoder wraps one ps_decoder_t.
//
// # Concurrency
//
// A Decoder is not safe for concurrent use. pocketsphinx keeps all search
// state inside the decoder and takes no locks, so each Decoder must have a
// single owner at a time (one goroutine, or callers that serialise access
// themselves, as asr/sphinx does with a per-stream mutex). Separate Decoders
// may be used from separate goroutines at once: they share no mutable C
// state apart from the process-wide log callback installed by this package.
//
// # Logging
//
// sphinxbase logs a great deal to stderr by default. This package installs
// its own log callback once per process: informational output is dropped and
// the first ERROR/FATAL line of a failing call is kept per OS thread, so that
// failures come back as Go errors carrying pocketsphinx's own reason instead
// of text on the server's stderr. Do not pass -logfn: it would replace that
// callback for the whole process, so NewDecoder rejects it.
//
// # Memory
//
// No C memory escapes: hypotheses are copied into Go strings or into the
// caller's buffer, and PCM is read by C only for the duration of ProcessRaw.
// Close frees the decoder; it is idempotent. A cleanup frees a Decoder that
// is garbage collected without Close (a backstop only: with the full en-us
// language model a decoder holds about 94 MB of C memory the GC cannot see).
package sphinx
