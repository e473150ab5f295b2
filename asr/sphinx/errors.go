package sphinx

import "errors"

// ErrModelMissing is returned by New when a model, dictionary, language
// model, grammar or keyword file does not exist. The wrapped message names
// the path and the Debian package that provides it.
var ErrModelMissing = errors.New("sphinx: model file not found")

// ErrConfig is returned by New for an inconsistent Config (no search or more
// than one of LM, JSGF and Keywords; a -samprate other than 16000).
var ErrConfig = errors.New("sphinx: invalid config")

// ErrClosed is returned by Start after Recognizer.Close, and by Write after
// the stream's Close.
var ErrClosed = errors.New("sphinx: closed")
