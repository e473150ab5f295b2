package web

import "errors"

// ErrConfig is returned by New for an unusable Config.
var ErrConfig = errors.New("web: invalid config")

// ErrShutdownForced is returned by Shutdown when its context ended before
// every session had closed cleanly; the remaining connections were cut.
var ErrShutdownForced = errors.New("web: shutdown deadline passed, connections cut")

// errInternal wraps a failure inside a session that is not the client's doing.
var errInternal = errors.New("web: internal error")
