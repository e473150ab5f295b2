package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// SpecBenchResult compares plain and speculative greedy decoding of the
// same prompts in one run.
type SpecBenchResult struct {
	Drafter      string // "draft" or "lookup"
	Prompts      int
	PromptTokens int // all prompts together, over all repeats
	DecodeTokens int // answer tokens per mode over all repeats (the same in both when Identical)
	PlainTime    time.Duration
	SpecTime     time.Duration // includes the draft model's catch-up on each prompt
	Identical    bool          // speculative answers equal the plain ones token for token
	Stats        SpecStats     // of the speculative runs only
	Answers      []string      // the speculative answers, for display
}

// PlainTokensPerSecond and SpecTokensPerSecond are decode throughputs.
func (r SpecBenchResult) PlainTokensPerSecond() float64 {
	return float64(r.DecodeTokens) / r.PlainTime.Seconds()
}

// SpecTokensPerSecond is the speculative decode throughput.
func (r SpecBenchResult) SpecTokensPerSecond() float64 {
	return float64(r.DecodeTokens) / r.SpecTime.Seconds()
}

// Speedup is plain decode time over speculative decode time.
func (r SpecBenchResult) Speedup() float64 {
	return r.PlainTime.Seconds() / r.SpecTime.Seconds()
}

// ErrNoDrafter is returned by BenchSpec when neither a draft model nor
// prompt lookup is configured.
var ErrNoDrafter = errors.New("engine: speculative bench needs Config.DraftPath or Config.PromptLookup")

// BenchSpec decodes a greedy answer (up to maxTokens) to each
// conversation twice, plainly and speculatively, alternating so both see
// the same machine load, and reports both speeds and the acceptance
// figures. Each decode starts from a fresh sequence after the prompt. The
// whole set is answered repeats times (at least once): short answers take
// milliseconds, and a noisy machine needs more of them for a steady ratio.
func (e *Engine) BenchSpec(ctx context.Context, convs [][]llm.Message, maxTokens, repeats int) (SpecBenchResult, error) {
	res := SpecBenchResult{Drafter: e.Speculative(), Prompts: len(convs), Identical: true}
	if e.spec == nil {
		return res, ErrNoDrafter
	}
	var err error
	job := func() {
		before := e.spec.stats
		params := samplerParams{repeatPenalty: e.cfg.RepeatPenalty}
		for r := 0; r < max(repeats, 1); r++ {
			if err = e.benchSpecOnce(ctx, &res, convs, params, maxTokens, r == 0); err != nil {
				return
			}
		}
		after := e.spec.stats
		res.Stats = SpecStats{Rounds: after.Rounds - before.Rounds, Drafted: after.Drafted - before.Drafted, Accepted: after.Accepted - before.Accepted}
	}
	if qerr := e.runOnScheduler(ctx, job); qerr != nil {
		return res, qerr
	}
	return res, err
}

// benchSpecOnce answers every conversation plainly, then speculatively,
// adding to res; keep records the speculative answers.
func (e *Engine) benchSpecOnce(ctx context.Context, res *SpecBenchResult, convs [][]llm.Message, params samplerParams, maxTokens int, keep bool) error {
	for _, msgs := range convs {
		prompt, err := e.renderPrompt(msgs, toolPrompt{}, maxTokens)
		if err != nil {
			return err
		}
		res.PromptTokens += len(prompt)
		plain, _, tPlain, err := e.decodeIDs(ctx, prompt, nil, params, maxTokens, false)
		if err != nil {
			return err
		}
		// The draft's cache must not keep this prompt from the last
		// round: each speculative run pays its catch-up.
		if e.spec.draft != nil {
			e.spec.draft.seq.tokens = e.spec.draft.seq.tokens[:0]
		}
		fast, _, tSpec, err := e.decodeIDs(ctx, prompt, e.openingsFor(msgs), params, maxTokens, true)
		if err != nil {
			return err
		}
		res.DecodeTokens += len(plain)
		res.PlainTime += tPlain
		res.SpecTime += tSpec
		res.Identical = res.Identical && slices.Equal(plain, fast)
		if keep {
			res.Answers = append(res.Answers, e.tok.Decode(fast))
		}
	}
	return nil
}
