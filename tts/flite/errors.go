package flite

import "errors"

// ErrConfig is returned by New for a rate or pitch out of range.
var ErrConfig = errors.New("tts/flite: invalid config")
