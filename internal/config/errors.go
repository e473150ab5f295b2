package config

import (
	"errors"
	"fmt"
)

// ErrUnknownField is wrapped by errors for a key the config does not have
// (usually a typo).
var ErrUnknownField = errors.New("config: unknown field")

// ErrInvalid is wrapped by errors for a value out of range or of the wrong kind.
var ErrInvalid = errors.New("config: invalid value")

// ErrNoKey is returned by Set for a dotted key that names no setting.
var ErrNoKey = errors.New("config: no such key")

// problem is one located config error: its text starts with where the value
// came from ("configs/x.yaml: line 12: ..."), and errors.Is matches kind.
type problem struct {
	kind error
	msg  string
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.kind }

func newProblem(kind error, format string, args ...any) error {
	return &problem{kind: kind, msg: fmt.Sprintf(format, args...)}
}
