// Package config loads voxpipe's YAML configuration. A Config is built in
// order: Default() → a YAML file (unknown keys are errors) → command-line
// overrides (Set) → Validate(). Every error names the key and where its value
// came from, e.g.
//
//	configs/x.yaml: line 12: field "vad_silnce" not found in "pipeline" (known: vad, barge_in, ...)
//
// The Go types mirror the YAML; the binaries map them onto each backend's own
// Config (this package imports no engine, so it builds and tests anywhere).
package config

import (
	"time"
)

// Config is the whole configuration.
type Config struct {
	Server   Server   `yaml:"server"`
	Log      Log      `yaml:"log"`
	Pipeline Pipeline `yaml:"pipeline"`
	ASR      ASR      `yaml:"asr"`
	LLM      LLM      `yaml:"llm"`
	TTS      TTS      `yaml:"tts"`
	// Telemetry: OpenTelemetry export (capacity.go).
	Telemetry Telemetry `yaml:"telemetry"`

	Knowledge Knowledge `yaml:"knowledge"`
	Tools     Tools     `yaml:"tools"`
	// Cache: the answer cache in front of the LLM (docs/cache.md).
	Cache Cache `yaml:"cache"`

	// origins maps a dotted key to where its value came from
	// ("configs/x.yaml: line 12", "flag --addr"); keys absent are defaults.
	origins map[string]string
}

// Server is the HTTP / WebSocket listener.
type Server struct {
	Addr          string       `yaml:"addr"`            // host:port
	MaxSessions   SessionLimit `yaml:"max_sessions"`    // concurrent voice sessions, or auto; more get HTTP 503
	MaxFrameBytes int          `yaml:"max_frame_bytes"` // largest WebSocket message accepted
	// ReadTimeout bounds reading an HTTP request's headers and body.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// IdleTimeout closes a WebSocket that sent nothing (not even a pong)
	// for this long, and idle keep-alive HTTP connections.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// RTC configures the WebRTC transport (POST /rtc/offer).
	RTC RTC `yaml:"rtc"`

	// Access and limits (docs/security.md).
	Auth Auth `yaml:"auth"`
	// AllowInsecurePublic lets the server listen on a non-loopback
	// address with no API keys set.
	AllowInsecurePublic bool `yaml:"allow_insecure_public"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) besides
	// the server's own that may open sessions; "*" allows any.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts are Host header names ("name" or "name:port") served
	// besides localhost and loopback addresses, which a loopback server
	// (and a keyless one on a LAN address) is limited to against DNS
	// rebinding; a keyed public server checks Host only when this is set.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// DrainTimeout: on SIGTERM, new sessions get 503 and running ones may go
	// on this long before they are told going_away; 0 = at once.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	Limits       Limits        `yaml:"limits"`
	// Resume keeps a dropped /ws session for its client to resume.
	Resume Resume `yaml:"resume"`
	// Record records sessions (internal/record); off by default.
	Record Record `yaml:"record"`
	// Malloc tunes the C allocator (cgo/malloc).
	Malloc Malloc    `yaml:"malloc"`
	API    APILimits `yaml:"api"`
	// Admission and the admin listener (capacity.go).
	Admission Admission `yaml:"admission"`
	AdminAddr string    `yaml:"admin_addr"` // /debug/pprof; empty = off
	// Xiaozhi serves ESP32 xiaozhi devices (OTA + WebSocket).
	Xiaozhi Xiaozhi `yaml:"xiaozhi"`
}

// Xiaozhi configures the xiaozhi device endpoints (web/xiaozhi, docs/xiaozhi.md).
type Xiaozhi struct {
	Enabled         bool          `yaml:"enabled"`
	OTAPath         string        `yaml:"ota_path"`         // the device's OTA address path
	WSPath          string        `yaml:"ws_path"`          // the device WebSocket path
	WebSocketURL    string        `yaml:"websocket_url"`    // handed out by OTA; "" = ws://<request Host><ws_path>
	Token           string        `yaml:"token"`            // handed out by OTA, required on the WebSocket when set
	ProtocolVersion int           `yaml:"protocol_version"` // binary framing 1, 2 or 3
	Devices         string        `yaml:"devices"`          // open | allow_list
	AllowedDevices  []string      `yaml:"allowed_devices"`  // device ids (MACs) for allow_list
	OutputRate      int           `yaml:"output_rate"`      // answer Opus rate: 16000 | 24000
	HelloTimeout    time.Duration `yaml:"hello_timeout"`
	TTSStartLead    time.Duration `yaml:"tts_start_lead"`
	IdleTimeout     time.Duration `yaml:"idle_timeout"`
	Emotion         string        `yaml:"emotion"` // llm emotion per turn; "" = none
	// DeviceTools offers a device's own MCP tools (volume, screen, ...) to
	// its session's turns, when tools.enabled and the hello has features.mcp.
	DeviceTools bool          `yaml:"device_tools"`
	MCPTimeout  time.Duration `yaml:"mcp_timeout"`   // each request to the device's MCP server
	MCPListWait time.Duration `yaml:"mcp_list_wait"` // a call before this session's tool list waits this long for it
	// VisionURL and VisionToken go to the device in MCP initialize: where
	// its camera tool uploads a photo and question; "" = no camera tool.
	VisionURL   string `yaml:"vision_url"`
	VisionToken string `yaml:"vision_token"`
}

// Auth configures API keys for /ws, /rtc/offer, /v1 and the token endpoint.
type Auth struct {
	// APIKeysEnv names the environment variable holding comma-separated
	// keys; unset or empty = auth off.
	APIKeysEnv string `yaml:"api_keys_env"`
	// TokenTTL is how long a session token from POST /auth/token lasts.
	TokenTTL time.Duration `yaml:"token_ttl"`
}

// Limits bound what one client may take.
type Limits struct {
	// SessionsPerMinute is how many sessions one client IP may open per
	// minute (a burst of as many); 0 = no limit.
	SessionsPerMinute int `yaml:"sessions_per_minute"`
	// MaxSession ends a session that has run this long; 0 = no limit.
	MaxSession time.Duration `yaml:"max_session"`
	// HeaderTimeout bounds reading an HTTP request's headers.
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// StartTimeout closes a /ws connection that has not sent an accepted
	// start this long after the upgrade (it holds a session slot).
	StartTimeout time.Duration `yaml:"start_timeout"`
}

// Resume configures resumable /ws sessions (web.ResumeConfig).
type Resume struct {
	// TTL is how long a dropped session waits for its client; 0 = off.
	TTL time.Duration `yaml:"ttl"`
	// MaxParked bounds the dropped sessions kept at once (the oldest goes).
	MaxParked int `yaml:"max_parked"`
}

// Malloc tunes glibc's allocator for the C engines (cgo/malloc): 0 keeps
// glibc's default for that setting.
type Malloc struct {
	Arenas        int           `yaml:"arenas"`         // M_ARENA_MAX
	MmapThreshold int           `yaml:"mmap_threshold"` // bytes; fixed (no upward adjustment)
	TrimInterval  time.Duration `yaml:"trim_interval"`  // malloc_trim(0) this often; 0 = never
}

// Record configures per-session recordings (internal/record.Config).
type Record struct {
	Enabled       bool          `yaml:"enabled"`
	Dir           string        `yaml:"dir"`
	MaxRecordings int           `yaml:"max_recordings"` // 0 = no bound
	MaxBytes      int64         `yaml:"max_bytes"`      // the folder's total, and one recording's audio; 0 = no bound
	MaxAge        time.Duration `yaml:"max_age"`        // 0 = no bound
}

// APILimits bound one /v1 request (llm/openaiapi.Limits).
type APILimits struct {
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	MaxMessages  int   `yaml:"max_messages"`
	MaxStops     int   `yaml:"max_stops"`
	MaxTokens    int   `yaml:"max_tokens"` // 0: the model's bound
}

// RTC is the WebRTC transport's network setup.
type RTC struct {
	// ICEServers are STUN/TURN servers; none = host candidates only.
	ICEServers []ICEServer `yaml:"ice_servers"`
	// UDPPortMin..UDPPortMax bounds ICE's UDP ports (firewalls); 0..0 = any.
	UDPPortMin uint16 `yaml:"udp_port_min"`
	UDPPortMax uint16 `yaml:"udp_port_max"`
	// IncludeLoopback offers 127.0.0.1 candidates (a browser on this machine).
	IncludeLoopback bool          `yaml:"include_loopback"`
	ConnectTimeout  time.Duration `yaml:"connect_timeout"` // answer → open data channel
	FailedTimeout   time.Duration `yaml:"failed_timeout"`  // silence from the peer before giving up
}

// ICEServer is one STUN or TURN server.
type ICEServer struct {
	URLs       []string `yaml:"urls"`
	Username   string   `yaml:"username"`
	Credential string   `yaml:"credential"`
}

// Log selects the level and format of the process log.
type Log struct {
	Level  string `yaml:"level"`  // trace|debug|info|warn|error
	Format string `yaml:"format"` // auto|console|json
}

// Pipeline holds per-session behaviour (pipeline.Config).
type Pipeline struct {
	VAD                VAD  `yaml:"vad"`
	BargeIn            bool `yaml:"barge_in"`
	BargeInMinSpeechMs int  `yaml:"barge_in_min_speech_ms"`
	// Backchannels said over the answer do not cut it
	// (pipeline.BackchannelConfig).
	Backchannels Backchannels `yaml:"backchannels"`
	// Echo is the server-side echo cancellation (pipeline.EchoConfig);
	// Denoise the noise suppression before the VAD and the recogniser.
	Echo                  Echo          `yaml:"echo"`
	Denoise               Denoise       `yaml:"denoise"`
	SystemPrompt          string        `yaml:"system_prompt"`
	MaxTokens             int           `yaml:"max_tokens"`
	Temperature           float32       `yaml:"temperature"`
	MaxHistoryMessages    int           `yaml:"max_history_messages"`
	OutputLeadMs          int           `yaml:"output_lead_ms"`
	PlaybackReportTimeout time.Duration `yaml:"playback_report_timeout"`
	// EarlyStart prefills the LLM with a stable partial transcript while
	// the person speaks: auto (on when the LLM backend can prefill), on, off.
	EarlyStart string `yaml:"early_start"`
	// EarlyStartStableMs is how long a partial must stay unchanged to be
	// prefilled (0: every partial).
	EarlyStartStableMs int `yaml:"early_start_stable_ms"`
	// Turn is the end-of-turn detector (pipeline/turn).
	Turn Turn `yaml:"turn"`
	// Faults (docs/security.md): an LLM silent this long fails the turn
	// (0 = wait); Apology is spoken after a turn's LLM fails ("" = none).
	LLMStallTimeout time.Duration `yaml:"llm_stall_timeout"`
	Apology         string        `yaml:"apology"`
	// MaxTurn ends an utterance that has lasted this long as if the person
	// had stopped (the words are answered, the client gets turn_limit);
	// 0 = no limit.
	MaxTurn time.Duration `yaml:"max_turn"`
}

// Backchannels are the acknowledgements that do not interrupt the answer.
type Backchannels struct {
	// Words by language, as the recogniser spells them; a session takes
	// every language's. None: every utterance over the answer cuts it.
	Words map[string][]string `yaml:"words"`
	// StopWords by language cut the answer at their first partial
	// transcript; other words wait for the final.
	StopWords map[string][]string `yaml:"stop_words"`
	// MaxMs of voiced speech interrupts whatever its words.
	MaxMs int `yaml:"max_ms"`
}

// Echo is the server-side echo cancellation (pipeline.EchoConfig).
type Echo struct {
	Mode       string `yaml:"mode"` // auto | on | off
	MaxDelayMs int    `yaml:"max_delay_ms"`
	TailMs     int    `yaml:"tail_ms"`
}

// Denoise is the noise suppression before the VAD and the recogniser
// (pipeline.DenoiseConfig).
type Denoise struct {
	Enabled bool `yaml:"enabled"`
	MaxDB   int  `yaml:"max_db"`
}

// Turn decides when the person's turn is over (pipeline/turn.Config).
type Turn struct {
	Mode         string  `yaml:"mode"` // semantic | silence
	Model        string  `yaml:"model"`
	MinSilenceMs int     `yaml:"min_silence_ms"`
	MaxSilenceMs int     `yaml:"max_silence_ms"`
	Threshold    float64 `yaml:"threshold"`
	DoubtMs      int     `yaml:"doubt_ms"`
	// IntonationYield and IntonationHold: the log-odds the intonation
	// before a pause adds to the score (pipeline/turn.Config); 0 = off.
	IntonationYield float64 `yaml:"intonation_yield"`
	IntonationHold  float64 `yaml:"intonation_hold"`
	// RememberSpeakers: how many devices' speakers (pitch ranges) are
	// remembered between sessions, each for RememberFor
	// (pipeline.SpeakerMemory); 0 = none.
	RememberSpeakers int `yaml:"remember_speakers"`
	// RememberVoices: how many of the last voices heard (pitch ranges,
	// kept with no device id) are offered to a session nobody remembers,
	// which borrows the one of its register; 0 = none.
	RememberVoices int           `yaml:"remember_voices"`
	RememberFor    time.Duration `yaml:"remember_for"`
	Threads        int           `yaml:"threads"`
	// Speculative starts the answer on a pause before the turn is committed.
	Speculative bool `yaml:"speculative"`
	// PauseFinal: at a pause whose partial scores at least this, the
	// recogniser finalises the words so far (pipeline.Config.PauseFinal);
	// 0 = never.
	PauseFinal float64 `yaml:"pause_final"`
	// PauseFinalMs: a pause this long gets the recogniser's final whatever
	// its partial scored (pipeline.Config.PauseFinalMs); 0 = only by score.
	PauseFinalMs int `yaml:"pause_final_ms"`
}

// Values of pipeline.early_start.
const (
	EarlyStartAuto = "auto"
	EarlyStartOn   = "on"
	EarlyStartOff  = "off"
)

// VAD is the endpointer (audio.VADConfig).
type VAD struct {
	StartMs      int     `yaml:"start_ms"`
	EndSilenceMs int     `yaml:"end_silence_ms"`
	PreRollMs    int     `yaml:"pre_roll_ms"`
	ThresholdDB  float64 `yaml:"threshold_db"`
	Detector     string  `yaml:"detector"`    // energy | silero (audio.DetectorEnergy, DetectorSilero)
	SpeechProb   float64 `yaml:"speech_prob"` // silero: speech from this probability on
}

// ASR selects the speech recogniser.
type ASR struct {
	Backend string `yaml:"backend"` // sphinx|volc|openai
	// ReplaceAfter failed utterances among the last 2×ReplaceAfter replace the engine instance
	// (internal/renew); 0 = never.
	ReplaceAfter int       `yaml:"replace_after"`
	Sphinx       Sphinx    `yaml:"sphinx"`
	Volc         VolcASR   `yaml:"volc"`   // remote.go
	OpenAI       OpenAIASR `yaml:"openai"` // remote.go
}

// Sphinx configures asr/sphinx. Empty paths mean the Debian package's files.
type Sphinx struct {
	ModelDir       string        `yaml:"model_dir"`
	Dict           string        `yaml:"dict"`
	LM             string        `yaml:"lm"`
	JSGF           string        `yaml:"jsgf"`
	Keywords       string        `yaml:"keywords"`
	FirstPassOnly  bool          `yaml:"first_pass_only"`
	Bestpath       bool          `yaml:"bestpath"`
	PoolSize       int           `yaml:"pool_size"`
	PoolMaxIdle    int           `yaml:"pool_max_idle"`
	WarmUp         bool          `yaml:"warm_up"`
	MaxHMMPerFrame int           `yaml:"max_hmm_per_frame"` // -maxhmmpf; 0 = pocketsphinx's 30000
	BestpathLW     float64       `yaml:"bestpath_lw"`       // -bestpathlw; 0 = pocketsphinx's 9.5
	PhoneLookahead int           `yaml:"phone_lookahead"`   // -pl_window, frames; 0 = pocketsphinx's 5
	WordPenalty    float64       `yaml:"word_penalty"`      // -wip; 0 = pocketsphinx's 0.65
	SilenceProb    float64       `yaml:"silence_prob"`      // -silprob; 0 = pocketsphinx's 0.005
	CMNInit        string        `yaml:"cmninit"`           // comma-separated cepstral mean; "" = the model's
	CMNInit8k      string        `yaml:"cmninit_8k"`        // the same for clients at 8 kHz or less; "" = cmninit
	CMNWeight      int           `yaml:"cmn_weight"`        // frames of history the starting mean counts as; 0 = pocketsphinx's 500
	CMNUpdate      int           `yaml:"cmn_update"`        // frames between mean updates within an utterance; 0 = pocketsphinx's own (every 3 s)
	ExtraArgs      string        `yaml:"extra_args"`        // "-flag value ..." passed to pocketsphinx
	Rescore        SphinxRescore `yaml:"rescore"`
}

// SphinxRescore configures n-best rescoring of the final with a GGUF
// language model (asr/sphinx.Rescore, asr/lmscore); off when Model is "".
type SphinxRescore struct {
	Model     string  `yaml:"model"`      // GGUF with ChatML tokens; "" = off
	NBest     int     `yaml:"nbest"`      // candidates scored per utterance
	Weight    float64 `yaml:"weight"`     // per nat of the model's log P, in lattice-score units
	WordBonus float64 `yaml:"word_bonus"` // per word, in lattice-score units
	TimeoutMs int     `yaml:"timeout_ms"` // past it the first pass's final is kept
	Threads   int     `yaml:"threads"`    // the scoring engine's worker threads
}

// LLM selects the language model.
type LLM struct {
	Backend string    `yaml:"backend"` // engine|openai|ark
	Engine  Engine    `yaml:"engine"`
	OpenAI  OpenAILLM `yaml:"openai"` // remote.go
	Ark     Ark       `yaml:"ark"`    // remote.go
}

// Engine configures the in-process GGUF engine (llm/engine).
type Engine struct {
	Model         string  `yaml:"model"`
	DraftModel    string  `yaml:"draft_model"`   // "" = no draft model
	PromptLookup  bool    `yaml:"prompt_lookup"` // draft from n-gram matches in the conversation when DraftModel is
	Threads       int     `yaml:"threads"`       // 0: one per core
	ContextSize   int     `yaml:"context_size"`  // 0: the model's
	ChatTemplate  string  `yaml:"chat_template"`
	Temperature   float32 `yaml:"temperature"`
	TopK          int     `yaml:"top_k"`
	TopP          float32 `yaml:"top_p"`
	MinP          float32 `yaml:"min_p"`
	RepeatPenalty float32 `yaml:"repeat_penalty"`
	Seed          uint64  `yaml:"seed"`
	MaxTokens     int     `yaml:"max_tokens"`
	// Sequences is how many answers are decoded together, one forward
	// pass for all (continuous batching); QueueSize how many more may wait
	// for a place before requests fail fast as busy (HTTP 429, a "busy"
	// error event).
	Sequences int `yaml:"sequences"`
	QueueSize int `yaml:"queue_size"`
}

// Knowledge is the local knowledge base (llm/knowledge): passages looked up
// for each turn and put before the user's words in the LLM request.
type Knowledge struct {
	Enabled bool `yaml:"enabled"`
	// Sources are folders of .txt/.md/.jsonl files and/or "dictionary"
	// (WordNet, FOLDOC and the Jargon File from Debian's packages).
	Sources          []string `yaml:"sources"`
	TopK             int      `yaml:"top_k"`              // passages at most
	MinScore         float64  `yaml:"min_score"`          // reranked score a passage needs
	MaxContextTokens int      `yaml:"max_context_tokens"` // the passage block's token budget
	CacheDir         string   `yaml:"cache_dir"`          // "": ~/.cache/voxpipe/knowledge
}

// Cache is the answer cache (docs/cache.md): questions that mean the same
// as one answered before are answered again from it, text and audio.
type Cache struct {
	Enabled bool `yaml:"enabled"`
	// TTL is how long an answer is served; each entry's is shortened by up
	// to Jitter (a fraction) at random. 0 = no expiry.
	TTL    time.Duration `yaml:"ttl"`
	Jitter float64       `yaml:"jitter"`
	// MaxEntries and MaxAudioBytes bound the cache (least recently used
	// go first); an answer with audio over a quarter of MaxAudioBytes is
	// kept without it.
	MaxEntries    int   `yaml:"max_entries"`
	MaxAudioBytes int64 `yaml:"max_audio_bytes"`
	// Threshold is the similarity of the hedge words a paraphrase needs
	// (content words always match exactly).
	Threshold float64 `yaml:"threshold"`
	// Preload is a file of questions, one a line, answered at start
	// through the configured LLM and TTS; "" = none.
	Preload string `yaml:"preload"`
	// Learn stores the answers of live turns; false serves only what
	// Preload stored (a curated FAQ: no sampled answer is frozen).
	Learn bool `yaml:"learn"`
}

// Tools are the functions the model may call in a voice turn (docs/tools.md).
type Tools struct {
	Enabled bool `yaml:"enabled"`
	// Builtin names the built-in tools: "time" (get_time) and "timers"
	// (set_timer, cancel_timer).
	Builtin []string `yaml:"builtin"`
	// TimeZone is the IANA zone the time and timers speak in; "" = the
	// server's local zone.
	TimeZone       string        `yaml:"time_zone"`
	MaxRounds      int           `yaml:"max_rounds"`
	CallTimeout    time.Duration `yaml:"call_timeout"`
	MaxResultBytes int           `yaml:"max_result_bytes"`
	FillerAfter    time.Duration `yaml:"filler_after"`
	FillerEvery    time.Duration `yaml:"filler_every"`
	Fillers        []string      `yaml:"fillers"`
	RoundsLimitSay string        `yaml:"rounds_limit_say"`
	// NoticeHold is how long a conversation whose device has gone keeps
	// its timers and their reminders for the device's return.
	NoticeHold time.Duration `yaml:"notice_hold"`
	// MCPConfig is an {"mcpServers": {...}} file of MCP servers whose tools
	// join every turn; "" = none. MCPAllow limits a server to the tools
	// named (a server not listed offers all of its tools).
	MCPConfig string              `yaml:"mcp_config"`
	MCPAllow  map[string][]string `yaml:"mcp_allow"`
}

// TTS selects the speech synthesiser.
type TTS struct {
	Backend string `yaml:"backend"` // flite|espeak|volc|openai
	// ReplaceAfter failed syntheses among the last 2×ReplaceAfter replace the engine instance
	// (internal/renew); 0 = never.
	ReplaceAfter int       `yaml:"replace_after"`
	Flite        Flite     `yaml:"flite"`
	Espeak       Espeak    `yaml:"espeak"`
	Volc         VolcTTS   `yaml:"volc"`   // remote.go
	OpenAI       OpenAITTS `yaml:"openai"` // remote.go
}

// Flite configures tts/flite.
type Flite struct {
	Voice string  `yaml:"voice"` // slt|rms|awb|kal16
	Rate  float64 `yaml:"rate"`  // 1.0 normal, >1 faster
	Pitch float64 `yaml:"pitch"` // mean F0 in Hz, 0 = the voice's own
}

// Espeak configures tts/espeak.
type Espeak struct {
	Voice string `yaml:"voice"` // en-us, de, cmn, ...
	Rate  int    `yaml:"rate"`  // words per minute
	Pitch int    `yaml:"pitch"` // 0..100
}

// Default returns the built-in configuration: offline engines, loopback
// listener. configs/default.yaml spells out the same values with comments.
func Default() Config {
	c := Config{
		Server: Server{
			Addr:           "127.0.0.1:8080",
			MaxSessions:    16,
			MaxFrameBytes:  64 << 10,
			ReadTimeout:    10 * time.Second,
			IdleTimeout:    30 * time.Second,
			RTC:            RTC{ICEServers: []ICEServer{}, ConnectTimeout: 20 * time.Second, FailedTimeout: 15 * time.Second},
			Auth:           Auth{APIKeysEnv: "VOXPIPE_API_KEYS", TokenTTL: 5 * time.Minute}, //nolint:gosec // G101: the variable's name, not a key
			AllowedOrigins: []string{},
			AllowedHosts:   []string{},
			Limits:         Limits{SessionsPerMinute: 60, HeaderTimeout: 5 * time.Second, StartTimeout: 10 * time.Second},
			Resume:         Resume{TTL: time.Minute, MaxParked: 1024},
			Malloc:         Malloc{Arenas: 4, MmapThreshold: 256 << 10, TrimInterval: 30 * time.Second},
			Record:         Record{Dir: "recordings", MaxRecordings: 100, MaxBytes: 1 << 30, MaxAge: 7 * 24 * time.Hour},
			API:            APILimits{MaxBodyBytes: 8 << 20, MaxMessages: 1024, MaxStops: 4},
			Admission:      Admission{TargetUtilization: 0.8, SessionCPU: 0.25, MaxV2VMs: 0},
			Xiaozhi: Xiaozhi{Enabled: true, OTAPath: "/xiaozhi/ota/", WSPath: "/xiaozhi/v1/", ProtocolVersion: 1,
				Devices: "open", AllowedDevices: []string{}, OutputRate: 24000, HelloTimeout: 10 * time.Second,
				TTSStartLead: 100 * time.Millisecond, IdleTimeout: 120 * time.Second, Emotion: "neutral",
				DeviceTools: true, MCPTimeout: 5 * time.Second, MCPListWait: 2 * time.Second},
		},
		Telemetry: Telemetry{ServiceName: "voxpipe"},
		Log:       Log{Level: "info", Format: "auto"},
		Pipeline: Pipeline{
			VAD:                VAD{StartMs: 100, EndSilenceMs: 500, PreRollMs: 300, ThresholdDB: 10, Detector: "silero", SpeechProb: 0.5},
			BargeIn:            true,
			BargeInMinSpeechMs: 200,
			Backchannels: Backchannels{MaxMs: 1000, Words: map[string][]string{
				"en": {"mm", "mhm", "mm-hm", "mm-hmm", "hm", "hmm", "uh-huh", "uh huh", "huh", "aha", "yeah", "yes", "yep", "yup",
					"ok", "okay", "right", "sure", "i see", "got it", "alright"},
				"zh": {"嗯", "对", "好", "好的", "是", "是的", "哦", "噢"},
			}, StopWords: map[string][]string{
				"en": {"stop", "wait", "no", "hold on", "hang on", "pause", "enough", "quiet", "shut up", "cancel"},
				"zh": {"停", "等等", "等一下", "别说了", "不对"},
			}},
			Echo:                  Echo{Mode: "auto", MaxDelayMs: 400, TailMs: 150},
			SystemPrompt:          "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences.",
			MaxTokens:             128,
			Temperature:           0,
			MaxHistoryMessages:    20,
			OutputLeadMs:          60, // see pipeline/config.go defaultOutputLeadMs
			PlaybackReportTimeout: 500 * time.Millisecond,
			EarlyStart:            EarlyStartAuto,
			EarlyStartStableMs:    150,
			Turn: Turn{Mode: "semantic", Model: "models/voxpipe-eou-q8_0.gguf", MinSilenceMs: 200, MaxSilenceMs: 1300,
				Threshold: 0.5, DoubtMs: 800, IntonationYield: 0.7, RememberSpeakers: 10000, RememberVoices: 32, RememberFor: 24 * time.Hour, Threads: 1, Speculative: true, PauseFinal: 0.1,
				PauseFinalMs: 300},
			LLMStallTimeout: 15 * time.Second,
			MaxTurn:         60 * time.Second,
			Apology:         "Sorry, something went wrong. Please say that again.",
		},
		ASR: ASR{
			Backend:      "sphinx",
			ReplaceAfter: 3,
			Sphinx: Sphinx{FirstPassOnly: true, Bestpath: true, PoolSize: 8, PoolMaxIdle: 8, WarmUp: true, MaxHMMPerFrame: 4000, PhoneLookahead: 3, SilenceProb: 0.05,
				CMNInit:   "45.85,-1.85,2.51,7.13,1.15,-1.18,-2.50,0.54,-1.82,-1.05,-4.48,-1.63,1.76",
				CMNInit8k: "45.45,15.56,-13.21,22.93,-7.53,-2.51,4.17,-10.04,8.88,-5.54,-6.31,3.06,-5.87",
				Rescore:   SphinxRescore{Model: "models/voxpipe-rescore-q8_0.gguf", NBest: 5, Weight: 0.0025, WordBonus: -0.01, TimeoutMs: 100, Threads: 1}},
		},
		LLM: LLM{
			Backend: "engine",
			Engine: Engine{
				Model:         "models/voxpipe-demo-q8_0.gguf",
				PromptLookup:  true,
				Temperature:   0.7,
				TopK:          40,
				TopP:          0.95,
				MinP:          0.05,
				RepeatPenalty: 1.1,
				MaxTokens:     256,
				Sequences:     16,
				QueueSize:     8,
			},
		},
		Knowledge: Knowledge{
			Enabled:          true,
			Sources:          []string{"dictionary"},
			TopK:             2,
			MinScore:         7,
			MaxContextTokens: 120,
		},
		Tools: Tools{
			Enabled:        false, // configs/default.yaml says why
			Builtin:        []string{"time", "timers"},
			MaxRounds:      4,
			CallTimeout:    10 * time.Second,
			MaxResultBytes: 8 << 10,
			FillerAfter:    1200 * time.Millisecond,
			FillerEvery:    4 * time.Second,
			Fillers:        []string{"One moment.", "Still working on it."},
			RoundsLimitSay: "Sorry, I could not finish that.",
			NoticeHold:     10 * time.Minute,
			MCPAllow:       map[string][]string{},
		},
		Cache: Cache{
			Enabled:       false, // configs/default.yaml says why
			TTL:           24 * time.Hour,
			Jitter:        0.1,
			MaxEntries:    10000,
			MaxAudioBytes: 256 << 20,
			Threshold:     0.75,
			Learn:         true,
		},
		TTS: TTS{
			Backend:      "flite",
			ReplaceAfter: 3,
			Flite:        Flite{Voice: "slt", Rate: 1.0},
			Espeak:       Espeak{Voice: "en-us", Rate: 175, Pitch: 50},
		},
	}
	setRemoteDefaults(&c)
	return c
}
