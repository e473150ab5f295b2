package openaiapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

// Answers lets requests that opt in ("voxpipe_cache": true in the body)
// be answered from an answer cache (docs/cache.md). A request qualifies
// when it is one question (a system prompt at most before it, no tools)
// that answercache.Classify finds safe; its scope is Scope with the
// request's system prompt and sampling added. Answers it had to generate
// are stored, text only, unless they failed, called a tool or reached
// max_tokens. Requests that do not opt in never touch the cache.
type Answers struct {
	Cache *answercache.Cache
	Scope answercache.Scope
	// Knowledge returns the knowledge base's version now (the model's
	// answers draw on it); nil: none.
	Knowledge func() string
}

// question returns the system prompt and the question of a one-question
// request.
func question(req llm.Request) (system, q string, ok bool) {
	if len(req.Tools) > 0 {
		return "", "", false
	}
	msgs := req.Messages
	if len(msgs) > 0 && msgs[0].Role == llm.RoleSystem {
		system, msgs = msgs[0].Content, msgs[1:]
	}
	if len(msgs) != 1 || msgs[0].Role != llm.RoleUser {
		return "", "", false
	}
	return system, msgs[0].Content, true
}

// Outcomes of a request that opted in (the CacheHeader).
const (
	cacheHit    = "hit"
	cacheMiss   = "miss"
	cacheBypass = "bypass" // not one safe question: not looked up, not stored
)

// stream answers req from the cache when it can, else from model; outcome
// says which.
func (a *Answers) stream(ctx context.Context, model llm.Model, req llm.Request) (tokens <-chan llm.Token, outcome string, err error) {
	system, q, ok := question(req)
	meaning := answercache.Parse(q)
	if !ok || answercache.Classify(meaning, 0) != "" {
		tokens, err = model.Stream(ctx, req)
		return tokens, cacheBypass, err
	}
	scope := a.Scope
	scope.SystemPrompt = system
	if a.Knowledge != nil {
		scope.Knowledge = a.Knowledge()
	}
	scope.Model += fmt.Sprintf(" temperature=%g top_p=%g max_tokens=%d stop=%q", req.Temperature, req.TopP, req.MaxTokens, req.Stop)
	if e := a.Cache.Lookup(scope, meaning); e != nil {
		out := make(chan llm.Token, 2)
		out <- llm.Token{Text: e.Answer}
		out <- llm.Token{Done: true, Usage: &llm.Usage{}} // nothing was computed
		close(out)
		return out, cacheHit, nil
	}
	in, err := model.Stream(ctx, req)
	if err != nil {
		return nil, cacheMiss, err
	}
	out := make(chan llm.Token)
	go relay(ctx, in, out, req.MaxTokens, func(answer string) { a.Cache.Store(scope, meaning, q, answer, nil) })
	return out, cacheMiss, nil
}

// relay forwards tokens to out and stores the answer when it ended well
// (no error, no tool call, under maxTokens). It returns once tokens is
// closed (the model closes it after ctx ends), so it never outlives the
// request's stream.
func relay(ctx context.Context, tokens <-chan llm.Token, out chan<- llm.Token, maxTokens int, store func(string)) {
	defer close(out)
	var text strings.Builder
	keep := true
	for tok := range tokens {
		text.WriteString(tok.Text)
		if tok.Err != nil || len(tok.ToolCalls) > 0 {
			keep = false
		}
		if tok.Done && keep && (maxTokens <= 0 || tok.Usage == nil || tok.Usage.CompletionTokens < maxTokens) {
			store(strings.TrimSpace(text.String()))
		}
		select {
		case out <- tok:
		case <-ctx.Done():
			for range tokens { // drain: the model stops on ctx and closes
			}
			return
		}
	}
}
