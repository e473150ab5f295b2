package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/llm/knowledge/store"
	"github.com/voxpipe/voxpipe/llm/openaiapi"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

// openAnswerCache makes the answer cache when cache.enabled (nil when
// not). Its scope is the model, the voice and the recogniser; its
// knowledge version is "" until the knowledge base among closers (if any)
// is ready, its fingerprint after: answers given without the base are
// flushed when it comes.
func openAnswerCache(ctx context.Context, c *config.Config, closers []io.Closer, log zerolog.Logger) *pipeline.AnswerCache {
	cc := c.Cache
	if !cc.Enabled {
		return nil
	}
	ac := &pipeline.AnswerCache{
		Cache: answercache.New(answercache.Config{
			TTL: cc.TTL, Jitter: cc.Jitter, MaxEntries: cc.MaxEntries, MaxAudioBytes: cc.MaxAudioBytes, Threshold: cc.Threshold,
		}),
		Scope: answercache.Scope{
			Model:    fmt.Sprintf("%s %s t=%g/%g", c.LLM.Backend, modelID(c), c.Pipeline.Temperature, c.LLM.Engine.Temperature),
			Voice:    ttsVoice(c),
			Language: c.ASR.Backend,
		},
		NoLearn: !cc.Learn,
	}
	if base := knowledgeBase(closers); base != nil {
		var version atomic.Pointer[string]
		ac.Knowledge = func() string {
			if v := version.Load(); v != nil {
				return *v
			}
			return ""
		}
		fp, err := store.Fingerprint(c.Knowledge.Sources)
		if err != nil {
			fp = fmt.Sprintf("sources %q", c.Knowledge.Sources)
		}
		go func() {
			if _, err := base.Wait(ctx); err == nil {
				v := "kb " + fp
				version.Store(&v)
			}
		}()
	}
	log.Info().Dur("ttl", cc.TTL).Int("max_entries", cc.MaxEntries).Int64("max_audio_bytes", cc.MaxAudioBytes).Msg("answer cache on")
	return ac
}

func knowledgeBase(closers []io.Closer) *store.Base {
	for _, c := range closers {
		if b, ok := c.(*store.Base); ok {
			return b
		}
	}
	return nil
}

func ttsVoice(c *config.Config) string {
	switch c.TTS.Backend {
	case "flite":
		return fmt.Sprintf("flite %s %g %g", c.TTS.Flite.Voice, c.TTS.Flite.Rate, c.TTS.Flite.Pitch)
	case "espeak":
		return fmt.Sprintf("espeak %s %d %d", c.TTS.Espeak.Voice, c.TTS.Espeak.Rate, c.TTS.Espeak.Pitch)
	}
	return c.TTS.Backend
}

// startAnswerCache exports the cache's size in reg and, with cache.preload,
// answers the file's questions in the background (after the knowledge
// base is ready, so their answers are not flushed when it comes).
func startAnswerCache(ctx context.Context, c *config.Config, ac *pipeline.AnswerCache, be pipeline.Backends, pc pipeline.Config, reg *prometheus.Registry, log zerolog.Logger) error {
	if ac == nil {
		return nil
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_answer_cache_entries", Help: "Answers in the answer cache."},
			func() float64 { return float64(ac.Cache.Stats().Entries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_answer_cache_audio_bytes", Help: "Audio the answer cache keeps, in bytes."},
			func() float64 { return float64(ac.Cache.Stats().AudioBytes) }),
	)
	if c.Cache.Preload == "" {
		return nil
	}
	questions, err := readQuestions(c.Cache.Preload)
	if err != nil {
		return fmt.Errorf("cache.preload (%s): %w", c.Origin("cache.preload"), err)
	}
	go func() {
		if ac.Knowledge != nil {
			for ac.Knowledge() == "" && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
		started := time.Now()
		n, err := ac.Preload(ctx, be, pc, questions)
		ev := log.Info()
		if err != nil {
			ev = log.Warn().Err(err)
		}
		ev.Int("questions", len(questions)).Int("stored", n).Dur("took", time.Since(started)).Msg("answer cache preloaded")
	}()
	return nil
}

// readQuestions reads a file of questions, one a line; blank lines and
// lines starting with # are skipped.
func readQuestions(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if q := strings.TrimSpace(sc.Text()); q != "" && !strings.HasPrefix(q, "#") {
			qs = append(qs, q)
		}
	}
	return qs, sc.Err()
}

// apiAnswers lets /v1 requests that opt in use the voice sessions' cache,
// in a scope of their own (their system prompt and sampling are the
// request's); nil without a cache.
func apiAnswers(ac *pipeline.AnswerCache) *openaiapi.Answers {
	if ac == nil {
		return nil
	}
	return &openaiapi.Answers{Cache: ac.Cache, Scope: answercache.Scope{Model: "v1 " + ac.Scope.Model}, Knowledge: ac.Knowledge}
}
