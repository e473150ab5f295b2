package pipeline

import (
	"fmt"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/chunk"
)

// Internal audio format: the rate the VAD and the ASR see, and the frame
// length used on both sides of the session.
const (
	asrRate = 16000
	frameMs = 20
)

// FrameMs is the length of every audio frame the session sends (Output.Audio)
// and works in internally; transports announce it and pace by it.
const FrameMs = frameMs

// Backends are the engines a session talks to. All three are shared by every
// session and must be safe for concurrent use (their packages say so).
type Backends struct {
	ASR asr.Recognizer
	LLM llm.Model
	TTS tts.Synthesizer
	// EOU scores how complete a partial transcript reads, for the semantic
	// end of turn (Config.Turn); nil is fine in silence mode.
	EOU endturn.Scorer
	// TTSGate, shared by the sessions of an in-process TTS, lets answers'
	// first chunks be synthesised before other answers' later chunks
	// (ttsgate.go); nil: each session synthesises its chunks as they come.
	TTSGate *TTSGate
	// Speakers remembers each device's speaker (pitch range) from one
	// session to the next (speakers.go); nil: every session starts knowing
	// nothing of its speaker.
	Speakers *SpeakerMemory
	// Tools are the providers whose tools every turn of the session may
	// call (built-ins, MCP servers, the device's own); none: turns call no
	// tools. A transport appends its session's own (a xiaozhi device's MCP
	// tools) to a copy of the server's list.
	Tools []tools.Provider
	// Conversations finds a conversation again by Config.ConversationKey;
	// nil: every session has its own.
	Conversations *tools.Conversations
	// Answers is the answer cache the sessions share (cache.go); nil:
	// every question goes to the LLM.
	Answers *AnswerCache
}

// ToolsConfig bounds the tool calls of a turn (llmstage.go).
type ToolsConfig struct {
	// MaxRounds is how many times one turn may go back to the model with
	// tool results; the round past it is answered with RoundsLimitSay.
	// 0 means DefaultToolRounds.
	MaxRounds int
	// Limits bound each call (time, result size).
	Limits tools.Limits
	// FillerAfter is how long a call may run before the assistant says the
	// first of Fillers; FillerEvery spaces the ones after it (the last
	// filler repeats). No fillers, or FillerAfter 0: silence.
	FillerAfter, FillerEvery time.Duration
	Fillers                  []string
	// RoundsLimitSay is spoken when a turn reaches MaxRounds.
	RoundsLimitSay string
}

// DefaultToolRounds is ToolsConfig.MaxRounds's default.
const DefaultToolRounds = 4

// Config tunes one session.
type Config struct {
	InputRate, OutputRate int             // client audio rates (after transport decode / before encode)
	VAD                   audio.VADConfig // SampleRate is set by the session (16000)

	BargeIn            bool // the person may interrupt the answer by speaking
	BargeInMinSpeechMs int  // speech must last this long before it interrupts

	SystemPrompt       string
	MaxTokens          int
	Temperature        float32
	MaxHistoryMessages int // user+assistant messages kept (system prompt not counted); 0 = no cap

	Chunk chunk.Config

	// PlaybackReportTimeout is how long to wait for the client's played_ms
	// after a server-initiated barge-in before estimating it.
	PlaybackReportTimeout time.Duration
	// OutputLeadMs is how far ahead of real time audio may be sent (pacing).
	OutputLeadMs int

	// EarlyStart prefills the LLM with the conversation plus a stable
	// partial transcript while the person is still speaking, so the final
	// request only processes what changed (see prefill.go).
	EarlyStart EarlyStart
	// EarlyStartStableMs is how long a partial must stay unchanged before
	// it is prefilled; 0 prefills every partial.
	EarlyStartStableMs int

	// Turn decides when the person's turn is over. In semantic mode the VAD
	// waits at most Turn.MaxSilenceMs (VAD.EndSilenceMs is replaced) and the
	// turn ends sooner when Backends.EOU finds the partial complete
	// (eou.go); silence mode waits VAD.EndSilenceMs.
	Turn endturn.Config
	// Speculative starts the answer on a pause in semantic mode, before the
	// commit, and holds its audio (speculate.go).
	Speculative bool
	// PauseFinal (semantic mode): at a pause whose partial scores at least
	// this, the ASR stage ends the recogniser's utterance there, so that the
	// end-of-turn score, the speculative answer and a commit during the pause
	// all have the final's words (a recogniser's final, after its best-path
	// and rescoring passes, often differs from its last partial), and the
	// commit does not wait for the final. Speech after the pause starts a new
	// stream fed the utterance's audio from its start, so the final still
	// covers the whole utterance in one decode. 0 = never (asrstage.go).
	PauseFinal float64
	// PauseFinalMs (semantic mode, with PauseFinal on): a pause this long
	// gets the recogniser's final whatever its partial scored. The partial
	// of a finished question is often worse than its final (the words
	// pocketsphinx's best-path and rescoring passes put right read as an
	// unfinished sentence to the scorer), and the turn would then wait
	// Turn.MaxSilenceMs; a pause this long is rare inside a phrase, so the
	// decode again when speech goes on is rare too. 0 = by score only.
	PauseFinalMs int

	// Faults (docs/security.md). LLMStallTimeout fails a turn whose LLM
	// sends nothing (not its first token, not the next) for this long;
	// 0 = wait. Apology, when set, is spoken (and sent as answer text)
	// after a turn's LLM fails or stalls, before its error event.
	LLMStallTimeout time.Duration
	Apology         string
	// MaxTurn ends an utterance that has lasted this long (from its
	// speech_start, pauses included) as if the person had stopped: what was
	// said so far is recognised and answered, and the client gets an error
	// event with CodeTurnLimit. 0 = no limit.
	MaxTurn time.Duration

	// Tools bounds the tool calls of a turn (Backends.Tools).
	Tools ToolsConfig
	// ConversationKey names the conversation across connections (a /ws
	// session's resumptions, a xiaozhi device's reconnections): with
	// Backends.Conversations, the session joins that conversation, so a
	// timer set before a drop rings after it. "": a conversation of the
	// session's own, ended with it.
	ConversationKey string

	// Echo cancels, here, the echo of the answer that a device without echo
	// cancellation of its own sends back (echo.go); DeviceEcho says the
	// session's device is one (xiaozhi without features.aec, a /ws start
	// with echo_cancelled false). Denoise suppresses noise before the VAD
	// and the recogniser.
	Echo       EchoConfig
	DeviceEcho bool
	Denoise    DenoiseConfig
	// Backchannel lists the acknowledgements that do not cut the answer
	// (backchannel.go); none: every utterance does.
	Backchannel BackchannelConfig

	// Device identifies the client device (xiaozhi's Device-Id, /ws start's
	// device), at most MaxDeviceIDBytes: a session starts from what
	// Backends.Speakers remembers of the person heard at it and leaves
	// what it heard. "" = a device of its own.
	Device string
}

// EarlyStart says whether a session prefills on stable partials.
type EarlyStart string

// EarlyStart modes.
const (
	EarlyStartAuto EarlyStart = "auto" // on when Backends.LLM implements llm.Prefiller
	EarlyStartOn   EarlyStart = "on"   // on; an LLM that cannot prefill is a config error
	EarlyStartOff  EarlyStart = "off"
)

// Prefiller returns model as an llm.Prefiller when early start is on for
// it, nil when it is off, and an error wrapping ErrConfig for an unknown
// mode or for "on" with a model that cannot prefill.
func (m EarlyStart) Prefiller(model llm.Model) (llm.Prefiller, error) {
	p, can := model.(llm.Prefiller)
	switch m {
	case EarlyStartOff:
		return nil, nil
	case EarlyStartAuto, "":
		if !can {
			return nil, nil
		}
		return p, nil
	case EarlyStartOn:
		if !can {
			return nil, fmt.Errorf("%w: early start is on but the LLM backend (%T) cannot prefill", ErrConfig, model)
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w: early start %q (want auto, on or off)", ErrConfig, string(m))
}

// DefaultConfig returns settings for a browser client at 16 kHz in and 48 kHz out.
func DefaultConfig() Config {
	return Config{
		InputRate:             16000,
		OutputRate:            48000,
		VAD:                   audio.DefaultVADConfig(),
		BargeIn:               true,
		BargeInMinSpeechMs:    200,
		SystemPrompt:          "You are a helpful voice assistant. Answer briefly, in plain spoken sentences.",
		MaxTokens:             256,
		Temperature:           0.7,
		MaxHistoryMessages:    20,
		Chunk:                 chunk.DefaultConfig(),
		PlaybackReportTimeout: 500 * time.Millisecond,
		OutputLeadMs:          defaultOutputLeadMs,
		EarlyStart:            EarlyStartAuto,
		EarlyStartStableMs:    defaultEarlyStartStableMs,
		// Silence by default: a session needs Backends.EOU for semantic.
		Turn: endturn.Config{Mode: endturn.ModeSilence},
		Echo: EchoConfig{Mode: EchoAuto, MaxDelayMs: DefaultEchoMaxDelayMs, TailMs: DefaultEchoTailMs},
	}
}

// defaultOutputLeadMs: the pacer sends audio at most this far ahead of real
// time. The first frame of an answer goes out at once whatever the lead, so
// the lead only decides how much a client holds ahead: at 200 ms Chromium's
// WebRTC receiver buffered and time-stretched the burst, and its first
// audible sample played 268 ms (median of 5, 99-480) after first_audible_out
// against 131 ms (66-326) at 60 ms, alternated on the loaded dev VM
// (web/browser_test.go with VOXPIPE_BROWSER_LEAD_MS). At 0 it underruns
// (concealment between frames). A smaller lead also leaves less unplayed
// audio queued at a barge-in.
const defaultOutputLeadMs = 60

// defaultEarlyStartStableMs: pocketsphinx checks its hypothesis after every
// 20 ms frame and emits a partial when the text changes, which it does
// every 100-300 ms while a word is being spoken (the last word flickers
// between candidates). 150 ms lets most of those flickers pass, yet leaves
// the 500 ms endpointing silence (pipeline.vad.end_silence_ms) time to
// prefill the complete utterance before speech_end. A wrong guess costs only
// the tokens after the point where the final differs.
const defaultEarlyStartStableMs = 150

// validate checks cfg and be and returns cfg with the session's fixed fields set.
func (cfg Config) validate(be Backends) (Config, error) {
	switch {
	case be.ASR == nil:
		return cfg, fmt.Errorf("%w: no ASR backend", ErrConfig)
	case be.LLM == nil:
		return cfg, fmt.Errorf("%w: no LLM backend", ErrConfig)
	case be.TTS == nil:
		return cfg, fmt.Errorf("%w: no TTS backend", ErrConfig)
	case cfg.InputRate <= 0 || cfg.InputRate%(1000/frameMs) != 0:
		return cfg, fmt.Errorf("%w: input rate %d Hz (must be a positive multiple of 50)", ErrConfig, cfg.InputRate)
	case cfg.OutputRate <= 0 || cfg.OutputRate%(1000/frameMs) != 0:
		return cfg, fmt.Errorf("%w: output rate %d Hz (must be a positive multiple of 50)", ErrConfig, cfg.OutputRate)
	case be.TTS.SampleRate() <= 0:
		return cfg, fmt.Errorf("%w: TTS reports sample rate %d", ErrConfig, be.TTS.SampleRate())
	case cfg.OutputLeadMs < 0:
		return cfg, fmt.Errorf("%w: negative output lead %d ms", ErrConfig, cfg.OutputLeadMs)
	case cfg.MaxHistoryMessages < 0:
		return cfg, fmt.Errorf("%w: negative history cap %d", ErrConfig, cfg.MaxHistoryMessages)
	case cfg.MaxTurn < 0:
		return cfg, fmt.Errorf("%w: negative max turn %v", ErrConfig, cfg.MaxTurn)
	case cfg.EarlyStartStableMs < 0:
		return cfg, fmt.Errorf("%w: negative early start stability %d ms", ErrConfig, cfg.EarlyStartStableMs)
	case cfg.Tools.MaxRounds < 0 || cfg.Tools.FillerAfter < 0 || cfg.Tools.FillerEvery < 0:
		return cfg, fmt.Errorf("%w: negative tool rounds or filler time", ErrConfig)
	}
	if cfg.Tools.MaxRounds == 0 {
		cfg.Tools.MaxRounds = DefaultToolRounds
	}
	cfg, err := cfg.checkRoom()
	if err != nil {
		return cfg, err
	}
	if _, err := newBackchannels(cfg.Backchannel); err != nil {
		return cfg, err
	}
	if err := CheckDevice(cfg.Device); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if _, err := cfg.EarlyStart.Prefiller(be.LLM); err != nil {
		return cfg, err
	}
	if cfg.Turn.Mode == "" {
		cfg.Turn.Mode = endturn.ModeSilence
	}
	if err := cfg.Turn.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Turn.Mode == endturn.ModeSemantic {
		if be.EOU == nil {
			return cfg, fmt.Errorf("%w: turn mode semantic needs an end-of-utterance scorer (Backends.EOU)", ErrConfig)
		}
		cfg.VAD.EndSilenceMs = cfg.Turn.MaxSilenceMs
	} else {
		cfg.Speculative, cfg.PauseFinal = false, 0
	}
	if cfg.PauseFinal < 0 || cfg.PauseFinal > 1 {
		return cfg, fmt.Errorf("%w: PauseFinal %v: want a score in [0, 1]", ErrConfig, cfg.PauseFinal)
	}
	if cfg.PauseFinalMs < 0 {
		return cfg, fmt.Errorf("%w: PauseFinalMs %d: want >= 0", ErrConfig, cfg.PauseFinalMs)
	}
	if cfg.PauseFinal == 0 {
		cfg.PauseFinalMs = 0
	}
	cfg.VAD.SampleRate = asrRate
	if cfg.VAD.FrameMs == 0 {
		cfg.VAD.FrameMs = frameMs
	}
	if cfg.VAD.FrameMs != frameMs {
		return cfg, fmt.Errorf("%w: VAD frame %d ms (the session uses %d ms frames)", ErrConfig, cfg.VAD.FrameMs, frameMs)
	}
	if cfg.PlaybackReportTimeout <= 0 {
		cfg.PlaybackReportTimeout = DefaultConfig().PlaybackReportTimeout
	}
	return cfg, nil
}
