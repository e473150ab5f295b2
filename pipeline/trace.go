package pipeline

// The latency trace vocabulary (docs in ../shared/docs/architecture.md). The
// same names appear in client events, metrics, the web overlay and voxbench.
const (
	MarkSpeechStart     = "speech_start"
	MarkSpeechEnd       = "speech_end"
	MarkASRFirstPartial = "asr_first_partial"
	MarkASRFinal        = "asr_final"
	MarkLLMRequest      = "llm_request"
	MarkLLMFirstToken   = "llm_first_token"
	MarkTTSFirstChunk   = "tts_first_chunk"
	MarkTTSFirstAudio   = "tts_first_audio"
	MarkFirstAudioOut   = "first_audio_out"
	MarkPlaybackStart   = "playback_start"
	MarkTurnEnd         = "turn_end"
	MarkInterrupted     = "interrupted"
)

// MarkOrder lists the marks in the order a normal turn records them.
var MarkOrder = []string{
	MarkSpeechStart, MarkSpeechEnd, MarkASRFirstPartial, MarkASRFinal,
	MarkLLMRequest, MarkLLMFirstToken, MarkTTSFirstChunk, MarkTTSFirstAudio,
	MarkFirstAudioOut, MarkPlaybackStart, MarkTurnEnd, MarkInterrupted,
}
