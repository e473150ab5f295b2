// Package logging builds the process's zerolog logger: a human-readable
// console writer when the output is a terminal, JSON lines otherwise (for log
// shippers), at the level named in the config.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Output formats accepted by New.
const (
	FormatAuto    = "auto"    // console on a terminal, JSON otherwise
	FormatConsole = "console" // always human-readable
	FormatJSON    = "json"    // always JSON lines
)

// ErrLevel is returned for a level name zerolog does not know.
var ErrLevel = errors.New("logging: unknown level")

// ErrFormat is returned for a format other than auto, console or json.
var ErrFormat = errors.New("logging: unknown format")

// Levels lists the level names New accepts, most verbose first.
var Levels = []string{"trace", "debug", "info", "warn", "error"}

// ParseLevel maps a level name ("info", "debug", ...) to zerolog's level.
func ParseLevel(name string) (zerolog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "", "info":
		return zerolog.InfoLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("%w %q (want one of %s)", ErrLevel, name, strings.Join(Levels, ", "))
}

// New returns a logger writing to w. format is auto, console or json; with
// auto, w gets the console writer only when it is an *os.File attached to a
// terminal.
func New(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), err
	}
	console := false
	switch strings.ToLower(format) {
	case "", FormatAuto:
		console = IsTerminal(w)
	case FormatConsole:
		console = true
	case FormatJSON:
	default:
		return zerolog.Nop(), fmt.Errorf("%w %q (want auto, console or json)", ErrFormat, format)
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	if err != nil {
		return false
	}
	return info.Mode()&os.ModeCharDevice != 0
}
