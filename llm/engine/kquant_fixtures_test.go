package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// kquantRef is a llama.cpp reference of testdata/kquant (see its README): a fixture reference
// with the top logit and top-2 margin at every position of the teacher-forced prompt.
type kquantRef struct {
	fixtureRef
	PromptTop2Margin []float32 `json:"prompt_top2_margin"`
	PromptTopLogit   []float32 `json:"prompt_top_logit"`
}

// TestKQuantFixtures compares llama-quantize's Q4_K_M, Q5_K_M and Q2_K files with llama.cpp's own
// outputs, on every kernel tier of this CPU: stories260K (trained; its 64-wide rows make every
// matrix a fallback type: Q5_0 and Q8_0 in Q4_K_M, Q5_1 and Q8_0 in Q5_K_M) and tiny-k (random
// weights, rows of 256: Q4_K, Q5_K, Q6_K; Q2_K, Q3_K). Gates are the measured max |Δ| with a margin of 2-3x,
// for the logits at two prompt positions (logitTol) and for the winning logits along the prompt
// and the greedy steps (topTol). Measured (AVX2, AVX-512, generic):
//
//	stories260K Q4_K_M: logits 1.9e-6 (Q5_0 becomes Q8_0 exactly, so this is llama.cpp's own
//	                    arithmetic); top logits 0.041 (position 0) and 0.063 (generic: one Q8_0
//	                    activation rounding flip)
//	stories260K Q5_K_M: logits 0.22, top 0.14 (llama.cpp takes Q5_1's offset term from Q8_1
//	                    activations, whose d·Σx is stored in fp16; the engine sums it exactly)
//	tiny-k Q4_K_M:      logits 0.016, top 0.019 (llama.cpp rounds activations to Q8_K, one
//	                    scale per 256, the engine to Q8_0 for K-quant weights)
//	tiny-k Q5_K_M:      logits 0.020, top 0.014
//	tiny-k Q2_K:        logits 0.021, top 0.023 (Q2_K and Q3_K, re-rounded into Q8_0 at load)
//
// Teacher-forced top-1 must agree at every prompt position whose llama.cpp top-2 margin is
// above 2·topTol (the goal is 99%: 100% everywhere but tiny-k Q5_K_M, 63/64 with the one
// difference at a margin of 0.03), and the 64 greedy ids must be identical (they are) except at
// such a near-tie.
func TestKQuantFixtures(t *testing.T) {
	onTiers(t, simdTiers, func(tier string) {
		for _, c := range []struct {
			name             string
			logitTol, topTol float64
		}{
			{"stories260K-q4_k_m", 1e-5, 0.15}, {"stories260K-q5_k_m", 0.6, 0.4},
			{"tiny-k-q4_k_m", 0.04, 0.04}, {"tiny-k-q5_k_m", 0.05, 0.04}, {"tiny-k-q2_k", 0.05, 0.05},
		} {
			t.Run(tier+"/"+c.name, func(t *testing.T) { kquantCase(t, c.name, c.logitTol, c.topTol) })
		}
	})
}

func kquantCase(t *testing.T, name string, logitTol, topTol float64) {
	kquantCaseDir(t, filepath.Join("testdata", "kquant"), name, logitTol, topTol)
}

func kquantCaseDir(t *testing.T, dir, name string, logitTol, topTol float64) {
	b, err := os.ReadFile(filepath.Join(dir, name+".ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref kquantRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	_, m := testModel(t, filepath.Join(dir, name+".gguf"))
	m.hp.kvHalf = false // the reference's cache is F32
	rt := newCompute(m, 2, 256, defaultBatch)
	defer rt.close()
	vocab := m.hp.vocab

	kv := newKVCache(&m.hp, 256)
	all := make([]float32, len(ref.PromptIDs)*vocab)
	if err := rt.forward(context.Background(), kv, ref.PromptIDs, 0, all); err != nil {
		t.Fatal(err)
	}
	d3 := maxAbsDiff(all[3*vocab:4*vocab], ref.LogitsPos3)
	dl := maxAbsDiff(rt.logits, ref.LogitsLast)
	agree, nearTies := 0, 0
	var dTop float64
	for i := range ref.PromptIDs {
		row := all[i*vocab : (i+1)*vocab]
		id := argmax(row)
		dTop = max(dTop, maxAbsDiff(row[ref.PromptArgmaxIDs[i]:ref.PromptArgmaxIDs[i]+1], ref.PromptTopLogit[i:i+1]))
		switch {
		case id == ref.PromptArgmaxIDs[i]:
			agree++
		case float64(ref.PromptTop2Margin[i]) < 2*topTol:
			nearTies++
			t.Logf("position %d: top-1 %d, llama.cpp %d at margin %.3g (a near-tie)", i, id, ref.PromptArgmaxIDs[i], ref.PromptTop2Margin[i])
		default:
			t.Errorf("position %d: top-1 %d, llama.cpp %d (margin %.3g)", i, id, ref.PromptArgmaxIDs[i], ref.PromptTop2Margin[i])
		}
	}
	frac := float64(agree) / float64(len(ref.PromptIDs))
	t.Logf("teacher-forced top-1 agreement %d/%d (%.1f%%), max|Δ| pos3 %.3g last %.3g (tol %g), top logits %.3g (tol %g)",
		agree, len(ref.PromptIDs), 100*frac, d3, dl, logitTol, dTop, topTol)
	if frac < 0.99 && nearTies == 0 {
		t.Errorf("top-1 agreement %.3f < 0.99", frac)
	}
	if d3 > logitTol || dl > logitTol {
		t.Errorf("logits differ from llama.cpp: pos3 %.3g, last %.3g > %g", d3, dl, logitTol)
	}
	if dTop > topTol {
		t.Errorf("teacher-forced top logits differ from llama.cpp by %.3g > %g", dTop, topTol)
	}
	ids, tops := greedyRef(t, rt, kv, len(ref.PromptIDs), ref.GreedyIDs)
	checkGreedy(t, "greedy", ids, tops, ref.GreedyIDs, ref.GreedyTopLogit, ref.GreedyTop2Margin, topTol)
}
