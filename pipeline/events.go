package pipeline

// Event is one JSON message from the server to a client. The same events go
// over the WebSocket and over WebRTC's "events" data channel; docs/protocol.md
// is their reference. Type selects which fields are set.
type Event struct {
	Type string `json:"type"`
	Turn int    `json:"turn,omitempty"`

	// transcript, answer
	Text  string `json:"text,omitempty"`
	Final bool   `json:"final,omitempty"`
	// transcript: a backchannel ("mm-hm") said over the answer, kept in the
	// history; it starts no turn and the answer goes on
	Backchannel bool `json:"backchannel,omitempty"`

	// audio: the format of the binary frames that follow
	Encoding   string `json:"encoding,omitempty"`
	SampleRate int    `json:"sample_rate,omitempty"`
	FrameMs    int    `json:"frame_ms,omitempty"`

	// trace: milliseconds since speech_end for each mark that happened
	Marks          map[string]float64 `json:"marks,omitempty"`
	VoiceToVoiceMs *float64           `json:"voice_to_voice_ms,omitempty"`
	HeardMs        *float64           `json:"heard_ms,omitempty"` // first_audible_out − speech_end
	Interrupted    bool               `json:"interrupted,omitempty"`
	// trace: the LLM request's prompt tokens, those reused from the cache,
	// and those early start prefilled while the person spoke (Trace)
	PromptTokens int `json:"prompt_tokens,omitempty"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	EarlyTokens  int `json:"early_tokens,omitempty"`
	// trace: a remote LLM's time to first token, split (Trace.TTFT), in ms
	TTFTMs map[string]float64 `json:"ttft_ms,omitempty"`
	// trace: the end of turn (pipeline/turn) and speculative answers (EndOfTurn)
	EndOfTurn
	// trace: passages and tokens the knowledge stage added (llm/knowledge)
	KnowledgePassages int `json:"knowledge_passages,omitempty"`
	KnowledgeTokens   int `json:"knowledge_tokens,omitempty"`

	// trace: the turn's tool calls, in the order they started
	Tools []ToolTrace `json:"tools,omitempty"`
	// trace: the answer cache's outcome (hit, miss, off) and, when off for
	// a question, why it bypassed the cache (Trace.Cache)
	Cache       string `json:"cache,omitempty"`
	CacheBypass string `json:"cache_bypass,omitempty"`

	// tool_call, tool_result: the call
	Tool *ToolEvent `json:"tool,omitempty"`

	// ready: the token a /ws client resumes the session with after a
	// drop, and whether this session resumed an earlier one (then Turn is
	// the last turn number it had handed out)
	SessionToken string `json:"session_token,omitempty"`
	Resumed      bool   `json:"resumed,omitempty"`

	// error
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Server event types.
const (
	EventReady       = "ready"       // session accepted the start message
	EventTranscript  = "transcript"  // ASR partial or final (Final)
	EventSpeechEnd   = "speech_end"  // the utterance ended (committed) with words heard: its final and turn follow
	EventAnswer      = "answer"      // a delta of the answer's text; Final on the last
	EventAudio       = "audio"       // audio format info, sent before the first binary frame
	EventInterrupted = "interrupted" // the server cut the turn (barge-in); reply with interrupt{played_ms}
	EventTrace       = "trace"       // the turn's latency trace, at turn end
	EventError       = "error"       // Code + Message
	EventToolCall    = "tool_call"   // the model called a tool (Tool: id, name, arguments); it runs now
	EventToolResult  = "tool_result" // the call ended (Tool: outcome, duration_ms, result)
	EventNotice      = "notice"      // a tool speaks on its own (a timer rang): Text, Tool.Name; the answer events of its turn follow
)

// ToolEvent is the Tool of a tool_call or tool_result event.
type ToolEvent struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"` // tool_call: the JSON the model wrote
	// tool_result: one of the tools.Outcome constants, the call's time, and
	// what went back to the model (its first maxEventResult bytes)
	Outcome    string   `json:"outcome,omitempty"`
	DurationMs *float64 `json:"duration_ms,omitempty"`
	Result     string   `json:"result,omitempty"`
}

// ToolTrace is one tool call in a turn's trace: when it started (ms since
// speech_end, like the marks), how long it ran and how it ended.
type ToolTrace struct {
	Name       string  `json:"name"`
	AtMs       float64 `json:"at_ms"`
	DurationMs float64 `json:"duration_ms"`
	Outcome    string  `json:"outcome"`
}

// Error codes carried by EventError.
const (
	CodeBadMessage  = "bad_message"    // not JSON, or JSON of the wrong shape
	CodeUnknownType = "unknown_type"   // a control message type the server does not know
	CodeNotStarted  = "not_started"    // audio or control before start
	CodeBadAudio    = "bad_audio"      // odd-length PCM, undecodable Opus
	CodeBadFormat   = "bad_format"     // unsupported sample rate or encoding
	CodeTooLarge    = "too_large"      // a frame over the size limit
	CodeBusy        = "busy"           // server full, or the LLM's queue is full
	CodeBackend     = "backend_error"  // ASR, LLM or TTS failed mid-turn
	CodeInternal    = "internal_error" // anything else
	// CodeTurnLimit: the person spoke for longer than the turn limit
	// (Config.MaxTurn); the utterance was ended there and is answered.
	CodeTurnLimit = "turn_limit"
	// CodeTurnCut: on a resumed session, a turn the connection's drop cut
	// (Text holds the person's words).
	CodeTurnCut = "turn_cut"
	// CodeResumeFailed: a start's resume token is unknown, expired or
	// already used; the client may send a plain start.
	CodeResumeFailed = "resume_failed"
	// CodeToolRounds: the turn went back to the model with tool results
	// Config.Tools.MaxRounds times and was ended there.
	CodeToolRounds = "tool_rounds"
)

// ClientEvent is one control message from a client, already parsed.
type ClientEvent struct {
	Type     string  `json:"type"`
	Turn     int     `json:"turn,omitempty"`
	PlayedMs float64 `json:"played_ms,omitempty"`
}

// Client event types (besides start, which the transport handles).
const (
	ClientPlaybackStart = "playback_start" // the client began playing the turn's audio
	ClientInterrupt     = "interrupt"      // the client stopped playback after PlayedMs of the turn's audio
	ClientStop          = "stop"           // end the session
)
