package sphinx

import "errors"

// ErrNoCgo is returned by every constructor when the package was built
// without cgo (CGO_ENABLED=0): there is no pocketsphinx to call.
var ErrNoCgo = errors.New("sphinx: built without cgo; pocketsphinx unavailable")

// ErrClosed is returned by Decoder methods called after Close.
var ErrClosed = errors.New("sphinx: decoder closed")

// ErrConfig is returned by NewDecoder when pocketsphinx rejects the flags
// (unknown flag, bad value, odd number of arguments).
var ErrConfig = errors.New("sphinx: invalid decoder flags")

// ErrInit is returned by NewDecoder when ps_init fails (model, dictionary,
// language model or grammar could not be loaded).
var ErrInit = errors.New("sphinx: decoder init failed")

// ErrDecode is returned when ps_start_utt, ps_process_raw or ps_end_utt
// report a failure.
var ErrDecode = errors.New("sphinx: decode failed")
