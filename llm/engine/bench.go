package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/voxpipe/voxpipe/cgo/kernels"
)

// BenchResult is what Engine.Bench measured.
type BenchResult struct {
	PromptTokens int
	PromptTime   time.Duration // whole prompt, processed in batches
	TTFT         time.Duration // prompt plus sampling the first token
	DecodeTokens int
	DecodeTime   time.Duration
	Threads      int
	Kernels      string
	// CPU time the process used in each phase (all threads). On a shared
	// machine tokens per CPU-second says more than wall-clock speed.
	PromptCPU, DecodeCPU time.Duration
}

// PromptTokensPerSecond and DecodeTokensPerSecond are throughput figures.
func (b BenchResult) PromptTokensPerSecond() float64 {
	return float64(b.PromptTokens) / b.PromptTime.Seconds()
}

// DecodeTokensPerSecond is greedy decoding speed after the prompt.
func (b BenchResult) DecodeTokensPerSecond() float64 {
	return float64(b.DecodeTokens) / b.DecodeTime.Seconds()
}

// Bench runs a prompt of promptTokens pseudo-random tokens and then greedily
// decodes decodeTokens on a fresh sequence, on the scheduler goroutine
// (so it waits for queued requests).
func (e *Engine) Bench(ctx context.Context, promptTokens, decodeTokens int) (BenchResult, error) {
	res := BenchResult{PromptTokens: promptTokens, DecodeTokens: decodeTokens, Threads: e.cfg.Threads, Kernels: kernels.Features()}
	if promptTokens < 1 || promptTokens+decodeTokens > e.cfg.ContextSize {
		return res, fmt.Errorf("engine: bench needs %d positions, context is %d", promptTokens+decodeTokens, e.cfg.ContextSize)
	}
	var err error
	job := func() {
		rng := rand.New(rand.NewPCG(1, 2))
		prompt := make([]int32, promptTokens)
		prompt[0] = e.tok.BOS()
		for i := 1; i < len(prompt); i++ {
			prompt[i] = int32(rng.IntN(e.model.hp.vocab))
		}
		kv := newKVCache(&e.model.hp, e.cfg.ContextSize)
		kv.reserve(promptTokens + decodeTokens)
		start, cpu0 := time.Now(), processCPU()
		if err = e.rt.forward(ctx, kv, prompt, 0, nil); err != nil {
			return
		}
		res.PromptTime = time.Since(start)
		res.PromptCPU = processCPU() - cpu0
		one := []int32{argmax(e.rt.logits)}
		res.TTFT = time.Since(start)
		start, cpu0 = time.Now(), processCPU()
		for i := 0; i < decodeTokens; i++ {
			if err = e.rt.forward(ctx, kv, one, promptTokens+i, nil); err != nil {
				return
			}
			one[0] = argmax(e.rt.logits)
		}
		res.DecodeTime = time.Since(start)
		res.DecodeCPU = processCPU() - cpu0
	}
	if err := e.runOnScheduler(ctx, job); err != nil {
		return res, err
	}
	return res, err
}

// processCPU is the user+system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
