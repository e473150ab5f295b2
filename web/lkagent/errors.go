package lkagent

import "errors"

// ErrConfig marks a Config the worker cannot run with.
var ErrConfig = errors.New("lkagent: bad config")

// ErrRegister is returned when the server does not confirm the worker's
// registration.
var ErrRegister = errors.New("lkagent: registration failed")
