package engine

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// sharedDir is the shared LLM fixtures folder (skips the test when absent).
func sharedDir(t testing.TB) string { t.Helper(); return testenv.SharedLLM(t) }

type fixtureRef struct {
	PromptIDs          []int32   `json:"prompt_ids"`
	PromptArgmaxIDs    []int32   `json:"prompt_argmax_ids"`
	LogitsPos3         []float32 `json:"logits_pos3"`
	LogitsLast         []float32 `json:"logits_last"`
	GreedyIDs          []int32   `json:"greedy_ids"`
	GreedyTop2Margin   []float32 `json:"greedy_top2_margin"`
	GreedyTopLogit     []float32 `json:"greedy_top_logit"`
	GreedyText         *string   `json:"greedy_text"`
	TextPrompt         string    `json:"text_prompt"`
	TextPromptIDs      []int32   `json:"text_prompt_ids"`
	TextLogitsLast     []float32 `json:"text_logits_last"`
	TextGreedyIDs      []int32   `json:"text_greedy_ids"`
	TextGreedyTop2     []float32 `json:"text_greedy_top2_margin"`
	TextGreedyTopLogit []float32 `json:"text_greedy_top_logit"`
	TextGreedyText     string    `json:"text_greedy_text"`
}

func loadRef(t testing.TB, path string) *fixtureRef {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r fixtureRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &r
}

// testModel loads a GGUF's weights (no tokenizer) for forward-pass tests.
func testModel(t testing.TB, path string) (*gguf.File, *model) {
	return testModelLayout(t, path, true)
}

// testModelLayout loads a model the way Open does (weights copied out of
// the mapping), with Q8_0 matrices repacked for the batched kernels or kept
// in the file's row layout.
func testModelLayout(t testing.TB, path string, repack bool) (*gguf.File, *model) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := loadModel(f)
	if err != nil {
		t.Fatal(err)
	}
	release, err := m.copyWeights(repack)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release() })
	return f, m
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		if d < 0 {
			d = -d
		}
		if d > m {
			m = d
		}
	}
	return m
}

// greedy decodes n tokens after the logits already in rt.logits, feeding
// each one at the next position, and returns ids and winning logits.
func greedy(t testing.TB, rt *compute, kv *kvCache, pos, n int) ([]int32, []float32) {
	t.Helper()
	ids := make([]int32, n)
	tops := make([]float32, n)
	for i := 0; i < n; i++ {
		id := argmax(rt.logits)
		ids[i], tops[i] = id, rt.logits[id]
		if err := rt.forward(context.Background(), kv, []int32{id}, pos+i, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ids, tops
}

// onTiers runs f once for each of tiers this CPU has, with the kernels
// forced to it, and puts the CPU's own choice back at the end.
func onTiers(t *testing.T, tiers []string, f func(tier string)) {
	t.Helper()
	defer kernels.UseGeneric(false)
	for _, tier := range tiers {
		if kernels.ForceFeatures(tier) == nil {
			f(tier)
		}
	}
}

// simdTiers are the kernel tiers a fixture test runs on (onTiers skips the
// ones this CPU lacks).
var simdTiers = []string{"generic", "avx2", "avx512vnni"}
