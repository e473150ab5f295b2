package pipeline

import "errors"

// ErrConfig is wrapped by NewSession for an unusable Config or Backends.
var ErrConfig = errors.New("pipeline: bad config")

// ErrAlreadyRun is returned by a second call to Session.Run.
var ErrAlreadyRun = errors.New("pipeline: session already run")

// Private sentinels that end a session without it being a failure.
var (
	errInputClosed = errors.New("pipeline: input closed")
	errStopped     = errors.New("pipeline: client sent stop")
)

// ErrOutputBacklog ends a session whose client stopped taking its output:
// more than maxOutBacklog events waited for the transport (Run's out).
var ErrOutputBacklog = errors.New("pipeline: the client is not reading: output backlog over its bound")

// errLLMClosed is reported (as a backend error) when an llm.Model closes its
// token channel without a Done or Err token.
var errLLMClosed = errors.New("llm: stream closed before the answer was done")

// errLLMStalled is reported (as a backend error) when the LLM sends nothing
// for Config.LLMStallTimeout.
var errLLMStalled = errors.New("llm: stalled (no token within the stall timeout)")

// errToolRounds ends a turn whose model asked for tools more than
// Config.Tools.MaxRounds times (CodeToolRounds).
var errToolRounds = errors.New("tools: too many rounds")
