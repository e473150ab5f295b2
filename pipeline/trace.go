package pipeline

// The latency trace vocabulary (docs in ../shared/docs/architecture.md). The
// same names appear in client events, metrics, the web overlay and voxbench.
const (
	MarkSpeechStart     = "speech_start"
	MarkSpeechEnd       = "speech_end"
	MarkASRFirstPartial = "asr_first_partial"
	MarkASRFinal        = "asr_final"
	MarkLLMRequest      = "llm_request"
	MarkLLMFirstToken   = "llm_first_token" // #nosec G101 -- a trace mark's name, not a credential
	MarkTTSFirstChunk   = "tts_first_chunk"
	MarkTTSFirstAudio   = "tts_first_audio"
	MarkFirstAudioOut   = "first_audio_out"
	// MarkFirstAudibleOut is when the first answer frame with an audible
	// sample (pipeline/audio: AudibleDBFS over AudibleWindowMs windows) was
	// handed to the transport: what a listener hears first.
	MarkFirstAudibleOut = "first_audible_out"
	MarkPlaybackStart   = "playback_start"
	MarkTurnEnd         = "turn_end"
	MarkInterrupted     = "interrupted"
)

// MarkLLMPrefillEarly is when the first early prefill of the turn's words
// began (early start, prefill.go). It is not in MarkOrder: it follows
// asr_first_partial but may fall before or after speech_end, and a turn
// without early start has none.
const MarkLLMPrefillEarly = "llm_prefill_early"

// MarkKnowledge is when the turn's words were first looked up in the
// knowledge base (llm/knowledge through llm.Observe): with early start
// usually before speech_end, on the stable partial. Not in MarkOrder; a
// turn without a knowledge stage has none.
const MarkKnowledge = "knowledge"

// MarkToolCall is when the turn's first tool call started (llmstage.go);
// Trace.Tools has every call. Not in MarkOrder; a turn without tool calls
// has none.
const MarkToolCall = "tool_call"

// MarkOrder lists the marks in the order a normal turn records them.
var MarkOrder = []string{
	MarkSpeechStart, MarkSpeechEnd, MarkASRFirstPartial, MarkASRFinal,
	MarkLLMRequest, MarkLLMFirstToken, MarkTTSFirstChunk, MarkTTSFirstAudio,
	MarkFirstAudioOut, MarkFirstAudibleOut, MarkPlaybackStart, MarkTurnEnd, MarkInterrupted,
}
