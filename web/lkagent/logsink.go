package lkagent

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	protologger "github.com/livekit/protocol/logger"
	"github.com/rs/zerolog"
)

// sdkLogger routes the LiveKit SDK's logs (and pion's, which it forwards)
// into zerolog: its info lines at Debug (it logs every ICE and signalling
// state change), its errors at Warn.
func sdkLogger(log zerolog.Logger) protologger.Logger {
	return protologger.LogRLogger(logr.New(zerologSink{log: log.With().Str("component", "livekit-sdk").Logger()}))
}

type zerologSink struct {
	log zerolog.Logger
	kv  []any
}

func (zerologSink) Init(logr.RuntimeInfo) {}

func (s zerologSink) Enabled(int) bool { return s.log.Debug().Enabled() }

func (s zerologSink) Info(_ int, msg string, kv ...any) {
	addFields(addFields(s.log.Debug(), s.kv), kv).Msg(msg)
}

func (s zerologSink) Error(err error, msg string, kv ...any) {
	addFields(addFields(s.log.Warn().Err(err), s.kv), kv).Msg(msg)
}

func (s zerologSink) WithValues(kv ...any) logr.LogSink {
	s.kv = append(slices.Clip(s.kv), kv...)
	return s
}

func (s zerologSink) WithName(name string) logr.LogSink {
	s.log = s.log.With().Str("logger", name).Logger()
	return s
}

func addFields(e *zerolog.Event, kv []any) *zerolog.Event {
	for i := 0; i+1 < len(kv); i += 2 {
		e = e.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	return e
}
