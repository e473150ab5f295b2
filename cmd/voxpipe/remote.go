package main

import (
	"fmt"
	"io"
	"os"

	"github.com/voxpipe/voxpipe/asr"
	asropenai "github.com/voxpipe/voxpipe/asr/openai"
	asrvolc "github.com/voxpipe/voxpipe/asr/volc"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/ark"
	"github.com/voxpipe/voxpipe/llm/openai"
	"github.com/voxpipe/voxpipe/tts"
	ttsopenai "github.com/voxpipe/voxpipe/tts/openai"
	ttsvolc "github.com/voxpipe/voxpipe/tts/volc"
)

// The remote backends' constructors. Secrets are read from the environment
// here and nowhere else; a required one that is missing stops the server
// with one line naming the variable.

// errMissingEnv is wrapped when a required credential variable is unset.
type errMissingEnv struct{ name, who string }

func (e errMissingEnv) Error() string {
	return fmt.Sprintf("%s needs credentials: the environment variable %s is not set", e.who, e.name)
}

func requireEnv(name, who string) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	return "", errMissingEnv{name, who}
}

// appID is the configured app id, else $VOLC_APP_ID.
func appID(configured, who string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	return requireEnv(asrvolc.AppIDEnv, who+" (or set its app_id)")
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func newOpenAILLM(c *config.Config) (llm.Model, io.Closer, error) {
	o := c.LLM.OpenAI
	m, err := openai.New(openai.Config{
		BaseURL: o.BaseURL, Model: o.Model, APIKey: os.Getenv(o.APIKeyEnv), Headers: o.Headers,
		TimeoutConnect: o.TimeoutConnect, TimeoutFirstToken: o.TimeoutFirstToken, TimeoutIdle: o.TimeoutIdle,
		Retries: o.Retries, NoStream: !o.Stream, Prefill: o.Prefill,
	})
	if err != nil {
		return nil, nil, err
	}
	return m, m.(io.Closer), nil
}

func newArk(c *config.Config) (llm.Model, io.Closer, error) {
	a := c.LLM.Ark
	key, err := requireEnv(ark.KeyEnv, "llm.backend ark")
	if err != nil {
		return nil, nil, err
	}
	m, err := ark.New(ark.Config{Model: a.Model, BaseURL: a.BaseURL, APIKey: key, Retries: a.Retries,
		TimeoutFirstToken: a.TimeoutFirstToken, TimeoutIdle: a.TimeoutIdle})
	if err != nil {
		return nil, nil, err
	}
	return m, nopCloser{}, nil
}

func newVolcASR(c *config.Config) (asr.Recognizer, io.Closer, error) {
	a := c.ASR.Volc
	id, err := appID(a.AppID, "asr.backend volc")
	if err != nil {
		return nil, nil, err
	}
	token, err := requireEnv(a.TokenEnv, "asr.backend volc")
	if err != nil {
		return nil, nil, err
	}
	r, err := asrvolc.New(asrvolc.Config{URL: a.URL, AppID: id, Token: token, ResourceID: a.ResourceID,
		PacketMs: a.PacketMs, EndWindowMs: a.EndWindowMs, Timeout: a.Timeout})
	if err != nil {
		return nil, nil, err
	}
	return r, r, nil
}

func newOpenAIASR(c *config.Config) (asr.Recognizer, io.Closer, error) {
	a := c.ASR.OpenAI
	r, err := asropenai.New(asropenai.Config{BaseURL: a.BaseURL, Model: a.Model, APIKey: os.Getenv(a.APIKeyEnv),
		Language: a.Language, Timeout: a.Timeout})
	if err != nil {
		return nil, nil, err
	}
	return r, r, nil
}

func newVolcTTS(c *config.Config) (tts.Synthesizer, io.Closer, error) {
	t := c.TTS.Volc
	id, err := appID(t.AppID, "tts.backend volc")
	if err != nil {
		return nil, nil, err
	}
	token, err := requireEnv(t.TokenEnv, "tts.backend volc")
	if err != nil {
		return nil, nil, err
	}
	s, err := ttsvolc.New(ttsvolc.Config{URL: t.URL, AppID: id, Token: token, Cluster: t.Cluster, Voice: t.Voice,
		Rate: t.Rate, Speed: t.Speed, Timeout: t.Timeout})
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}

func newOpenAITTS(c *config.Config) (tts.Synthesizer, io.Closer, error) {
	t := c.TTS.OpenAI
	s, err := ttsopenai.New(ttsopenai.Config{BaseURL: t.BaseURL, Model: t.Model, Voice: t.Voice, APIKey: os.Getenv(t.APIKeyEnv),
		SampleRate: t.SampleRate, Speed: t.Speed, Timeout: t.Timeout})
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}
