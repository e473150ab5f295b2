package config

import (
	"net/url"
	"time"
)

// The remote backends' sections: llm.openai, llm.ark, asr.volc, asr.openai,
// tts.volc, tts.openai. Secrets are never config values: each section names
// the environment variable its key or token is read from.

// OpenAILLM configures llm/openai (any OpenAI-compatible server).
type OpenAILLM struct {
	BaseURL string `yaml:"base_url"` // API root, e.g. http://127.0.0.1:8000/v1
	Model   string `yaml:"model"`
	// APIKeyEnv names the variable holding the API key; the key is sent
	// only when the variable is set.
	APIKeyEnv         string            `yaml:"api_key_env"`
	Headers           map[string]string `yaml:"headers"` // extra request headers (no secrets)
	TimeoutConnect    time.Duration     `yaml:"timeout_connect"`
	TimeoutFirstToken time.Duration     `yaml:"timeout_first_token"`
	TimeoutIdle       time.Duration     `yaml:"timeout_idle"`
	Retries           int               `yaml:"retries"` // before the first token only
	Stream            bool              `yaml:"stream"`  // false: one JSON answer per request
	Prefill           bool              `yaml:"prefill"` // early start through one-token requests
}

// Ark configures llm/ark (Volcengine Ark, key from ARK_API_KEY).
type Ark struct {
	Model             string        `yaml:"model"` // endpoint id, ep-...
	BaseURL           string        `yaml:"base_url"`
	TimeoutFirstToken time.Duration `yaml:"timeout_first_token"`
	TimeoutIdle       time.Duration `yaml:"timeout_idle"`
	Retries           int           `yaml:"retries"`
}

// VolcASR configures asr/volc (big-model streaming ASR).
type VolcASR struct {
	URL         string        `yaml:"url"`
	AppID       string        `yaml:"app_id"` // "" = $VOLC_APP_ID
	TokenEnv    string        `yaml:"token_env"`
	ResourceID  string        `yaml:"resource_id"`
	PacketMs    int           `yaml:"packet_ms"`
	EndWindowMs int           `yaml:"end_window_ms"`
	Timeout     time.Duration `yaml:"timeout"`
}

// OpenAIASR configures asr/openai (/v1/audio/transcriptions).
type OpenAIASR struct {
	BaseURL   string        `yaml:"base_url"`
	Model     string        `yaml:"model"`
	APIKeyEnv string        `yaml:"api_key_env"`
	Language  string        `yaml:"language"`
	Timeout   time.Duration `yaml:"timeout"`
}

// VolcTTS configures tts/volc (streaming TTS v1).
type VolcTTS struct {
	URL      string        `yaml:"url"`
	AppID    string        `yaml:"app_id"` // "" = $VOLC_APP_ID
	TokenEnv string        `yaml:"token_env"`
	Cluster  string        `yaml:"cluster"`
	Voice    string        `yaml:"voice"`
	Rate     int           `yaml:"rate"`
	Speed    float64       `yaml:"speed"`
	Timeout  time.Duration `yaml:"timeout"`
}

// OpenAITTS configures tts/openai (/v1/audio/speech).
type OpenAITTS struct {
	BaseURL    string        `yaml:"base_url"`
	Model      string        `yaml:"model"`
	Voice      string        `yaml:"voice"`
	APIKeyEnv  string        `yaml:"api_key_env"`
	SampleRate int           `yaml:"sample_rate"`
	Speed      float64       `yaml:"speed"`
	Timeout    time.Duration `yaml:"timeout"`
}

// setRemoteDefaults fills the remote sections of Default().
func setRemoteDefaults(c *Config) {
	c.LLM.OpenAI = OpenAILLM{ //nolint:gosec // environment variable names, not credentials
		BaseURL: "http://127.0.0.1:8000/v1", APIKeyEnv: "OPENAI_API_KEY", Headers: map[string]string{},
		TimeoutConnect: 2 * time.Second, TimeoutFirstToken: 10 * time.Second, TimeoutIdle: 10 * time.Second,
		Retries: 2, Stream: true, Prefill: true,
	}
	c.LLM.Ark = Ark{BaseURL: "https://ark.cn-beijing.volces.com/api/v3", TimeoutFirstToken: 10 * time.Second, TimeoutIdle: 10 * time.Second, Retries: 2}
	c.ASR.Volc = VolcASR{URL: "wss://openspeech.bytedance.com/api/v3/sauc/bigmodel_async", TokenEnv: "VOLC_ACCESS_TOKEN", //nolint:gosec // a variable name
		ResourceID: "volc.bigasr.sauc.duration", PacketMs: 200, Timeout: 10 * time.Second}
	c.ASR.OpenAI = OpenAIASR{BaseURL: "http://127.0.0.1:8000/v1", Model: "whisper-1", APIKeyEnv: "OPENAI_API_KEY", Timeout: 30 * time.Second} //nolint:gosec // a variable name
	c.TTS.Volc = VolcTTS{URL: "wss://openspeech.bytedance.com/api/v1/tts/ws_binary", TokenEnv: "VOLC_ACCESS_TOKEN",                           //nolint:gosec // a variable name
		Cluster: "volcano_tts", Voice: "BV001_streaming", Rate: 24000, Speed: 1, Timeout: 10 * time.Second}
	c.TTS.OpenAI = OpenAITTS{BaseURL: "http://127.0.0.1:8880/v1", Model: "tts-1", Voice: "alloy", APIKeyEnv: "OPENAI_API_KEY", //nolint:gosec // a variable name
		SampleRate: 24000, Speed: 1, Timeout: 10 * time.Second}
}

// remote checks the section of each remote backend that is selected.
func (v *validator) remote() {
	c := v.c
	httpURL := func(key, s string, schemes ...string) {
		u, err := url.Parse(s)
		ok := err == nil && u.Host != "" && u.User == nil
		if ok {
			ok = false
			for _, sc := range schemes {
				ok = ok || u.Scheme == sc
			}
		}
		if !ok {
			v.fail(key, "want %s://host[:port]/path without credentials (got %q)", schemes[0], s)
		}
	}
	if c.LLM.Backend == "openai" {
		o := c.LLM.OpenAI
		httpURL("llm.openai.base_url", o.BaseURL, "http", "https")
		v.nonEmpty("llm.openai.api_key_env", o.APIKeyEnv)
		v.durRange("llm.openai.timeout_connect", o.TimeoutConnect, 0, time.Minute)
		v.durRange("llm.openai.timeout_first_token", o.TimeoutFirstToken, 0, 10*time.Minute)
		v.durRange("llm.openai.timeout_idle", o.TimeoutIdle, 0, 10*time.Minute)
		v.intRange("llm.openai.retries", o.Retries, 0, 10)
	}
	if c.LLM.Backend == "ark" {
		a := c.LLM.Ark
		v.nonEmpty("llm.ark.model", a.Model)
		httpURL("llm.ark.base_url", a.BaseURL, "https", "http")
		v.durRange("llm.ark.timeout_first_token", a.TimeoutFirstToken, 0, 10*time.Minute)
		v.durRange("llm.ark.timeout_idle", a.TimeoutIdle, 0, 10*time.Minute)
		v.intRange("llm.ark.retries", a.Retries, 0, 10)
	}
	if c.ASR.Backend == "volc" {
		a := c.ASR.Volc
		httpURL("asr.volc.url", a.URL, "wss", "ws")
		v.nonEmpty("asr.volc.token_env", a.TokenEnv)
		v.nonEmpty("asr.volc.resource_id", a.ResourceID)
		v.intRange("asr.volc.packet_ms", a.PacketMs, 20, 1000)
		v.intRange("asr.volc.end_window_ms", a.EndWindowMs, 0, 10000)
		v.durRange("asr.volc.timeout", a.Timeout, time.Second, 10*time.Minute)
	}
	if c.ASR.Backend == "openai" {
		a := c.ASR.OpenAI
		httpURL("asr.openai.base_url", a.BaseURL, "http", "https")
		v.nonEmpty("asr.openai.api_key_env", a.APIKeyEnv)
		v.durRange("asr.openai.timeout", a.Timeout, time.Second, 10*time.Minute)
	}
	if c.TTS.Backend == "volc" {
		t := c.TTS.Volc
		httpURL("tts.volc.url", t.URL, "wss", "ws")
		v.nonEmpty("tts.volc.token_env", t.TokenEnv)
		v.nonEmpty("tts.volc.voice", t.Voice)
		v.oneOf("tts.volc.cluster", t.Cluster, "volcano_tts", "volcano_icl")
		if t.Rate != 8000 && t.Rate != 16000 && t.Rate != 24000 {
			v.fail("tts.volc.rate", "want 8000, 16000 or 24000 (got %d)", t.Rate)
		}
		v.floatRange("tts.volc.speed", t.Speed, 0.8, 2)
		v.durRange("tts.volc.timeout", t.Timeout, time.Second, 10*time.Minute)
	}
	if c.TTS.Backend == "openai" {
		t := c.TTS.OpenAI
		httpURL("tts.openai.base_url", t.BaseURL, "http", "https")
		v.nonEmpty("tts.openai.voice", t.Voice)
		v.nonEmpty("tts.openai.api_key_env", t.APIKeyEnv)
		v.intRange("tts.openai.sample_rate", t.SampleRate, 8000, 48000)
		v.floatRange("tts.openai.speed", t.Speed, 0.25, 4)
		v.durRange("tts.openai.timeout", t.Timeout, time.Second, 10*time.Minute)
	}
}
