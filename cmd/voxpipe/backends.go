package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/asr/lmscore"
	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/renew"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/pipeline"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	"github.com/voxpipe/voxpipe/tts"
	ttsespeak "github.com/voxpipe/voxpipe/tts/espeak"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// The backends built into this binary, by the name used in the config.
// Each constructor maps its config section onto the backend's own Config.
var (
	asrBackends = map[string]func(c *config.Config) (asr.Recognizer, io.Closer, error){
		"sphinx": newSphinx,
		"volc":   newVolcASR,
		"openai": newOpenAIASR,
	}
	llmBackends = map[string]func(c *config.Config) (llm.Model, io.Closer, error){
		"engine": newEngine,
		"openai": newOpenAILLM,
		"ark":    newArk,
	}
	ttsBackends = map[string]func(c *config.Config) (tts.Synthesizer, io.Closer, error){
		"flite":  newFlite,
		"espeak": newEspeak,
		"volc":   newVolcTTS,
		"openai": newOpenAITTS,
	}
)

// errBackend is wrapped when a configured backend is not built in.
var errBackend = errors.New("not built into this binary")

// checkBackendNames reports every backend name that is not built in, before
// any engine is loaded.
func checkBackendNames(c *config.Config) error {
	var errs []error
	check := func(key, name string, known []string) {
		for _, k := range known {
			if k == name {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s: %s %q: %w (known: %s)",
			c.Origin(key), key, name, errBackend, strings.Join(known, ", ")))
	}
	check("asr.backend", c.ASR.Backend, names(asrBackends))
	check("llm.backend", c.LLM.Backend, names(llmBackends))
	check("tts.backend", c.TTS.Backend, names(ttsBackends))
	return errors.Join(errs...)
}

func names[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// openBackends loads the three configured engines. On error nothing is
// left open. The closers are returned in the order to close them. log
// gets engine replacements (internal/renew).
func openBackends(c *config.Config, log zerolog.Logger) (pipeline.Backends, []io.Closer, error) {
	if err := checkBackendNames(c); err != nil {
		return pipeline.Backends{}, nil, err
	}
	var closers []io.Closer
	fail := func(err error) (pipeline.Backends, []io.Closer, error) {
		return pipeline.Backends{}, nil, errors.Join(err, closeAll(closers))
	}
	var be pipeline.Backends
	model, cl, err := llmBackends[c.LLM.Backend](c)
	if err != nil {
		return fail(fmt.Errorf("llm %s: %w", c.LLM.Backend, err))
	}
	be.LLM, closers = model, append(closers, cl)
	if e, ok := model.(*engine.Engine); ok {
		// What loaded, so a user's downloaded file says how it runs.
		info := e.Info()
		log.Info().Str("model", c.LLM.Engine.Model).Msg("llm engine loaded: " + info.String())
		if info.TemplateWarning != "" {
			log.Warn().Str("model", c.LLM.Engine.Model).Msg("llm engine: " + info.TemplateWarning)
		}
		if err := e.CanCallTools(); c.Tools.Enabled && err != nil {
			// Every turn would fail on the tool block: refuse at start.
			return fail(fmt.Errorf("%s: tools.enabled with llm.engine.model %s: %w; set tools.enabled false or llm.engine.chat_template",
				c.Origin("tools.enabled"), c.LLM.Engine.Model, err))
		}
	}
	// A failing ASR or TTS instance is replaced by a fresh one (internal/renew).
	rec, err := renew.NewASR(func() (asr.Recognizer, io.Closer, error) { return asrBackends[c.ASR.Backend](c) },
		renew.Options{After: c.ASR.ReplaceAfter, Name: "asr " + c.ASR.Backend, Log: log})
	if err != nil {
		return fail(fmt.Errorf("asr %s: %w", c.ASR.Backend, err))
	}
	be.ASR, closers = rec, append(closers, rec)
	synth, err := renew.NewTTS(func() (tts.Synthesizer, io.Closer, error) { return ttsBackends[c.TTS.Backend](c) },
		renew.Options{After: c.TTS.ReplaceAfter, Name: "tts " + c.TTS.Backend, Log: log})
	if err != nil {
		return fail(fmt.Errorf("tts %s: %w", c.TTS.Backend, err))
	}
	be.TTS, closers = synth, append(closers, synth)
	if b := c.TTS.Backend; b == "flite" || b == "espeak" {
		// In-process synthesis shares the server's CPU (and flite one
		// process-wide lock): answers' first chunks go before other answers'
		// later ones. A remote TTS's chunks are synthesised as they come.
		be.TTSGate = pipeline.NewTTSGate()
	}
	if t := c.Pipeline.Turn; t.Mode == string(endturn.ModeSemantic) {
		// Its own small engine, whatever the LLM backend: loaded once here.
		eou, err := endturn.OpenLM(t.Model, t.Threads, sessionCaches(c))
		if err != nil {
			return fail(fmt.Errorf("pipeline.turn.model (%s): %w", c.Origin("pipeline.turn.model"), err))
		}
		be.EOU, closers = eou, append(closers, eou)
		be.Speakers = speakerMemory(c)
	}
	tcl, err := openTools(c, &be, log)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, tcl...)
	return be, closers, nil
}

// speakerMemory is the memory of speakers c's sessions share: nil when the
// end of turn does not listen to intonation, or remembers nobody.
func speakerMemory(c *config.Config) *pipeline.SpeakerMemory {
	t := c.Pipeline.Turn
	if t.Mode != string(endturn.ModeSemantic) || t.IntonationYield == 0 && t.IntonationHold == 0 {
		return nil
	}
	return pipeline.NewSpeakerMemory(t.RememberSpeakers, t.RememberVoices, t.RememberFor)
}

func closeAll(closers []io.Closer) error {
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i].Close())
	}
	return errors.Join(errs...)
}

func newSphinx(c *config.Config) (asr.Recognizer, io.Closer, error) {
	s := c.ASR.Sphinx
	sc := asrsphinx.DefaultConfig()
	if s.ModelDir != "" {
		sc.ModelDir = s.ModelDir
	}
	if s.Dict != "" {
		sc.Dict = s.Dict
	}
	// One search: whichever the config names replaces the default LM.
	if s.LM != "" || s.JSGF != "" || s.Keywords != "" {
		sc.LM, sc.JSGF, sc.Keywords = s.LM, s.JSGF, s.Keywords
	}
	sc.FirstPassOnly = s.FirstPassOnly
	sc.Bestpath = s.Bestpath
	sc.PoolSize = s.PoolSize
	sc.PoolMaxIdle = s.PoolMaxIdle
	sc.WarmUp = s.WarmUp
	sc.MaxHMMPerFrame = s.MaxHMMPerFrame
	sc.BestpathLW = s.BestpathLW
	sc.PhoneLookahead = s.PhoneLookahead
	sc.WordPenalty = s.WordPenalty
	sc.SilenceProb = s.SilenceProb
	sc.CMNInit = s.CMNInit
	sc.NarrowbandCMNInit = s.CMNInit8k
	sc.CMNWeight = s.CMNWeight
	sc.CMNUpdate = s.CMNUpdate
	args, err := asrsphinx.ParseArgs(s.ExtraArgs)
	if err != nil {
		return nil, nil, err
	}
	sc.Args = args
	var scorer *lmscore.Scorer
	if rs := s.Rescore; rs.Model != "" {
		if scorer, err = lmscore.Open(rs.Model, rs.Threads); err != nil {
			return nil, nil, fmt.Errorf("asr.sphinx.rescore.model: %w", err)
		}
		sc.Rescore = asrsphinx.Rescore{Scorer: scorer, NBest: rs.NBest, Weight: rs.Weight, WordBonus: rs.WordBonus,
			Timeout: time.Duration(rs.TimeoutMs) * time.Millisecond, Observe: sphinxRescoreObserver}
	}
	r, err := asrsphinx.New(sc)
	if err != nil {
		if scorer != nil {
			_ = scorer.Close()
		}
		return nil, nil, err
	}
	if scorer == nil {
		return r, r, nil
	}
	return r, closerFunc(func() error { return errors.Join(r.Close(), scorer.Close()) }), nil
}

// sphinxRescoreObserver is asr/sphinx.Rescore.Observe for recognisers the
// config makes; `voxpipe bench asr` sets it to collect n-best lists.
var sphinxRescoreObserver func(asrsphinx.Rescored)

// sessionCaches is how many conversation caches an engine keeps for the
// voice sessions: one per session the server admits (64 with
// max_sessions: auto, room for a busy server).
func sessionCaches(c *config.Config) int {
	if n := int(c.Server.MaxSessions); n > 0 {
		return n
	}
	return 64
}

func newEngine(c *config.Config) (llm.Model, io.Closer, error) {
	e := c.LLM.Engine
	ec := engine.DefaultConfig()
	// A KV cache per voice session, besides the default's for /v1 clients.
	// With the default's 4 alone, eight sessions evicted each other's: the
	// early-start prefill made while a person spoke and the history were
	// gone by the final request, which prefilled the whole prompt again
	// (cached_tokens 0 on most turns at 8 sessions; docs/performance.md).
	// The caches grow with their conversations (kvGrowStep) and CacheBytes
	// still bounds them all.
	ec.Conversations += sessionCaches(c)
	ec.ModelPath = e.Model
	ec.DraftPath = e.DraftModel
	ec.PromptLookup = e.PromptLookup
	if e.Threads > 0 {
		ec.Threads = e.Threads
	}
	ec.ContextSize = e.ContextSize
	ec.ChatTemplate = e.ChatTemplate
	ec.Temperature = e.Temperature
	ec.TopK = e.TopK
	ec.TopP = e.TopP
	ec.MinP = e.MinP
	ec.RepeatPenalty = e.RepeatPenalty
	ec.Seed = e.Seed
	if e.MaxTokens > 0 {
		ec.MaxTokens = e.MaxTokens
	}
	ec.Sequences = e.Sequences
	ec.QueueSize = e.QueueSize
	m, err := engine.Open(ec)
	if err != nil {
		return nil, nil, err
	}
	return m, m, nil
}

func newFlite(c *config.Config) (tts.Synthesizer, io.Closer, error) {
	f := c.TTS.Flite
	s, err := ttsflite.New(ttsflite.Config{Voice: f.Voice, Rate: f.Rate, Pitch: f.Pitch})
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}

func newEspeak(c *config.Config) (tts.Synthesizer, io.Closer, error) {
	e := c.TTS.Espeak
	s, err := ttsespeak.New(ttsespeak.Config{Voice: e.Voice, Rate: e.Rate, Pitch: e.Pitch})
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}

// modelID names the LLM in /v1/models: the model file's base name.
func modelID(c *config.Config) string {
	if c.LLM.Backend == "engine" {
		return strings.TrimSuffix(filepath.Base(c.LLM.Engine.Model), filepath.Ext(c.LLM.Engine.Model))
	}
	return c.LLM.Backend
}

// pipelineConfig maps the pipeline section onto pipeline.Config.
func pipelineConfig(c *config.Config) pipeline.Config {
	p := c.Pipeline
	pc := pipeline.DefaultConfig()
	pc.VAD.StartMs = p.VAD.StartMs
	pc.VAD.EndSilenceMs = p.VAD.EndSilenceMs
	pc.VAD.PreRollMs = p.VAD.PreRollMs
	pc.VAD.ThresholdDB = p.VAD.ThresholdDB
	pc.VAD.Detector = p.VAD.Detector
	pc.VAD.SpeechProb = p.VAD.SpeechProb
	pc.BargeIn = p.BargeIn
	pc.BargeInMinSpeechMs = p.BargeInMinSpeechMs
	pc.Backchannel = backchannelConfig(p.Backchannels)
	pc.Echo = pipeline.EchoConfig{Mode: pipeline.EchoMode(p.Echo.Mode), MaxDelayMs: p.Echo.MaxDelayMs, TailMs: p.Echo.TailMs}
	pc.Denoise = pipeline.DenoiseConfig{On: p.Denoise.Enabled, MaxDB: p.Denoise.MaxDB}
	pc.SystemPrompt = p.SystemPrompt
	pc.MaxTokens = p.MaxTokens
	pc.Temperature = p.Temperature
	pc.MaxHistoryMessages = p.MaxHistoryMessages
	pc.OutputLeadMs = p.OutputLeadMs
	pc.PlaybackReportTimeout = p.PlaybackReportTimeout
	pc.EarlyStart = pipeline.EarlyStart(p.EarlyStart)
	pc.EarlyStartStableMs = p.EarlyStartStableMs
	pc.LLMStallTimeout, pc.Apology = p.LLMStallTimeout, p.Apology
	pc.MaxTurn = p.MaxTurn
	pc.Tools = toolsConfig(c)
	pc.Turn = endturn.Config{Mode: endturn.Mode(p.Turn.Mode), MinSilenceMs: p.Turn.MinSilenceMs,
		MaxSilenceMs: p.Turn.MaxSilenceMs, Threshold: p.Turn.Threshold, DoubtMs: p.Turn.DoubtMs,
		IntonationYield: p.Turn.IntonationYield, IntonationHold: p.Turn.IntonationHold}
	pc.Speculative, pc.PauseFinal, pc.PauseFinalMs = p.Turn.Speculative, p.Turn.PauseFinal, p.Turn.PauseFinalMs
	if c.ASR.Backend != "sphinx" {
		// A remote recogniser would reconnect, and bill the audio again,
		// at every pause the person speaks after.
		pc.PauseFinal = 0
	}
	return pc
}

// backchannelConfig merges every language's backchannels and stop words.
func backchannelConfig(b config.Backchannels) pipeline.BackchannelConfig {
	return pipeline.BackchannelConfig{Words: mergeLanguages(b.Words), StopWords: mergeLanguages(b.StopWords), MaxMs: b.MaxMs}
}

// mergeLanguages joins lists by language, in the order of the languages'
// names.
func mergeLanguages(byLang map[string][]string) []string {
	langs := make([]string, 0, len(byLang))
	for l := range byLang {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	var words []string
	for _, l := range langs {
		words = append(words, byLang[l]...)
	}
	return words
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
