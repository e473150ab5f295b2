package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

// Max |Δlogit| against llama.cpp measured here (AVX-512 VNNI kernels, 2
// threads), over logits_pos3, logits_last and the greedy top logits:
//
//	F32:  stories260K 6.7e-6; llama-gqa/qwen2/qwen3 tiny <= 1.8e-7.
//	Q8_0: stories260K 1.9e-6; llama-gqa/qwen2 tiny <= 1.2e-7; qwen3 tiny 2.8e-3
//	      (one activation's Q8_0 rounding flips: Q8_0 output is discontinuous).
//
// Greedy ids (32, and the 32 of the text prompt) are identical everywhere.
// The gates are the README's suggestions.
func TestFixtures(t *testing.T) {
	dir := sharedDir(t)
	for _, name := range []string{
		"stories260K-f32", "stories260K-q8_0",
		"llama-gqa-tiny-f32", "llama-gqa-tiny-q8_0",
		"qwen2-tiny-f32", "qwen2-tiny-q8_0",
		"qwen3-tiny-f32", "qwen3-tiny-q8_0",
	} {
		for _, c := range []struct {
			layout         string
			repack, kvHalf bool
		}{{"rows", false, false}, {"packed", true, false}, {"packed-kv16", true, true}} {
			if c.repack && !strings.HasSuffix(name, "q8_0") {
				continue // only Q8_0 matrices are repacked, and only quantized models get an fp16 cache
			}
			t.Run(name+"/"+c.layout, func(t *testing.T) { fixtureCase(t, dir, name, c.repack, c.kvHalf) })
		}
	}
}

func fixtureCase(t *testing.T, dir, name string, repack, kvHalf bool) {
	ref := loadRef(t, filepath.Join(dir, name+".ref.json"))
	_, m := testModelLayout(t, filepath.Join(dir, name+".gguf"), repack)
	m.hp.kvHalf = kvHalf // as the engine chooses for quantized models
	tol := 1e-4
	switch {
	case strings.HasPrefix(name, "stories") && strings.HasSuffix(name, "f32"):
		tol = 1e-3
	case strings.HasPrefix(name, "stories"):
		tol = 0.5
	case strings.HasSuffix(name, "q8_0"):
		tol = 0.02
	}
	rt := newCompute(m, 2, 256, defaultBatch)
	defer rt.close()
	vocab := m.hp.vocab

	// Whole prompt in one batch, logits for every position.
	kv := newKVCache(&m.hp, 256)
	all := make([]float32, len(ref.PromptIDs)*vocab)
	if err := rt.forward(nil, kv, ref.PromptIDs, 0, all); err != nil {
		t.Fatal(err)
	}
	d3 := maxAbsDiff(all[3*vocab:4*vocab], ref.LogitsPos3)
	dl := maxAbsDiff(rt.logits, ref.LogitsLast)
	t.Logf("max|Δ| pos3 %.3g last %.3g (tol %g)", d3, dl, tol)
	if d3 > tol || dl > tol {
		t.Errorf("logits differ from llama.cpp: pos3 %.3g, last %.3g > %g", d3, dl, tol)
	}
	ids, tops := greedy(t, rt, kv, len(ref.PromptIDs), len(ref.GreedyIDs))
	checkGreedy(t, "greedy", ids, tops, ref.GreedyIDs, ref.GreedyTopLogit, ref.GreedyTop2Margin, tol)

	// Token by token gives the same logits as the batch.
	kv2 := newKVCache(&m.hp, 256)
	var dTok float64
	for i, id := range ref.PromptIDs {
		if err := rt.forward(nil, kv2, []int32{id}, i, nil); err != nil {
			t.Fatal(err)
		}
		dTok = max(dTok, maxAbsDiff(rt.logits, all[i*vocab:(i+1)*vocab]))
	}
	t.Logf("batched vs token-by-token max|Δ| %.3g", dTok)
	if dTok > tol {
		t.Errorf("batched and token-by-token prompt logits differ by %.3g > %g", dTok, tol)
	}

	if len(ref.TextPromptIDs) > 0 {
		kv3 := newKVCache(&m.hp, 256)
		if err := rt.forward(nil, kv3, ref.TextPromptIDs, 0, nil); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(rt.logits, ref.TextLogitsLast); d > tol {
			t.Errorf("text_logits_last differ by %.3g > %g", d, tol)
		}
		ids, tops := greedy(t, rt, kv3, len(ref.TextPromptIDs), len(ref.TextGreedyIDs))
		checkGreedy(t, "text greedy", ids, tops, ref.TextGreedyIDs, ref.TextGreedyTopLogit, ref.TextGreedyTop2, tol)
	}
}

// checkGreedy requires identical ids, except that a step whose reference
// top-2 margin is below tol may legitimately flip (then the rest of the
// continuation is not comparable and checking stops).
func checkGreedy(t *testing.T, what string, got []int32, tops []float32, want []int32, wantTop, margin []float32, tol float64) {
	t.Helper()
	var maxTop float64
	for i := range want {
		if got[i] != want[i] {
			if float64(margin[i]) < tol {
				t.Logf("%s: step %d flipped (%d vs %d) at margin %.3g < tol", what, i, got[i], want[i], margin[i])
				return
			}
			t.Errorf("%s ids differ at step %d: got %v, want %v", what, i, got, want)
			return
		}
		maxTop = max(maxTop, maxAbsDiff(tops[i:i+1], wantTop[i:i+1]))
	}
	t.Logf("%s: %d ids identical, top logit max|Δ| %.3g", what, len(want), maxTop)
	if maxTop > tol {
		t.Errorf("%s top logits differ by %.3g > %g", what, maxTop, tol)
	}
}

// TestStoriesEndToEnd runs the text prompt through Engine.Stream (raw
// template, tokenizer, greedy sampling, streaming detokeniser) and expects
// llama.cpp's continuation.
func TestStoriesEndToEnd(t *testing.T) {
	dir := sharedDir(t)
	for _, name := range []string{"stories260K-f32", "stories260K-q8_0"} {
		ref := loadRef(t, filepath.Join(dir, name+".ref.json"))
		cfg := DefaultConfig()
		cfg.ModelPath = filepath.Join(dir, name+".gguf")
		cfg.Threads = 2
		cfg.RepeatPenalty = 1
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ids := e.Tokenizer().Encode(ref.TextPrompt, true, false)
		if fmt.Sprint(ids) != fmt.Sprint(ref.TextPromptIDs) {
			t.Errorf("%s: tokenized %v, want %v", name, ids, ref.TextPromptIDs)
		}
		ch, err := e.Stream(context.Background(), llm.Request{
			Messages:  []llm.Message{{Role: llm.RoleUser, Content: ref.TextPrompt}},
			MaxTokens: len(ref.TextGreedyIDs),
		})
		if err != nil {
			t.Fatal(err)
		}
		text, usage := collect(t, ch)
		// The stream drops the leading space of an answer's first piece.
		if text != strings.TrimPrefix(ref.TextGreedyText, " ") {
			t.Errorf("%s: streamed %q, want %q", name, text, ref.TextGreedyText)
		}
		if usage.PromptTokens != len(ref.TextPromptIDs) || usage.CompletionTokens != len(ref.TextGreedyIDs) {
			t.Errorf("%s: usage %+v", name, *usage)
		}
		e.Close()
	}
}
