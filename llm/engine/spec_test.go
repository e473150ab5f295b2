package engine

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// specIDs decodes maxTokens after prompt on the scheduler.
func specIDs(t *testing.T, e *Engine, prompt []int32, p samplerParams, maxTokens int, speculate bool) []int32 {
	t.Helper()
	var ids []int32
	var err error
	if qerr := e.runOnScheduler(context.Background(), func() {
		ids, _, _, err = e.decodeIDs(context.Background(), prompt, nil, p, maxTokens, speculate)
	}); qerr != nil {
		t.Fatal(qerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func specStats(t *testing.T, e *Engine) SpecStats {
	t.Helper()
	s, err := e.SpecStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomDraft is a smaller random model with the tiny vocabulary.
func randomDraft(t *testing.T) string {
	s := defaultTiny("llama", gguf.TypeQ8_0)
	s.dim, s.heads, s.kvHeads, s.ffn, s.layers, s.seed = 32, 2, 1, 64, 1, 99
	return writeTiny(t, s)
}

// TestSpecGreedyMatchesPlain: greedy speculative decoding gives the plain
// greedy tokens with a perfect draft (the model itself), a poor random
// draft and prompt lookup, for F32 and Q8_0 targets.
func TestSpecGreedyMatchesPlain(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0} {
		spec := defaultTiny("llama", typ)
		target := writeTiny(t, spec)
		drafts := map[string]func(*Config){
			"self":   func(c *Config) { c.DraftPath = target },
			"random": func(c *Config) { c.DraftPath = randomDraft(t) },
			"lookup": func(c *Config) { c.PromptLookup = true },
		}
		// A prompt that repeats itself gives prompt lookup something to find.
		prompt := []int32{1, 260, 261, 262, 263, 264, 265, 260, 261, 262, 263, 270, 271, 260, 261}
		for name, mod := range drafts {
			t.Run(typ.String()+"/"+name, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.ModelPath, cfg.Threads = target, 2
				mod(&cfg)
				e, err := Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				// Adaptive k depends on the calibration (timing) and would
				// turn an equal-cost draft off; tests fix it.
				e.spec.fixedK = 4
				for _, rp := range []float32{1, 1.3} {
					p := samplerParams{repeatPenalty: rp}
					plain := specIDs(t, e, prompt, p, 120, false)
					fast := specIDs(t, e, prompt, p, 120, true)
					if !slices.Equal(plain, fast) {
						t.Fatalf("repeat penalty %v: speculative tokens differ from plain greedy\nplain %v\nspec  %v", rp, plain, fast)
					}
				}
				st := specStats(t, e)
				t.Logf("%d tokens plain; rounds %d drafted %d accepted %d (%.0f%%)", 120, st.Rounds, st.Drafted, st.Accepted, 100*st.AcceptanceRate())
				if name == "self" && st.AcceptanceRate() < 0.9 {
					t.Fatalf("self-draft acceptance %.2f, want ≥ 0.9", st.AcceptanceRate())
				}
				if st.Drafted == 0 {
					t.Fatal("nothing was drafted")
				}
			})
		}
	}
}

// TestSpecStreamMatchesPlain: through Stream (stop strings, max tokens,
// streaming text, a conversation's cache across turns) the answer is the
// plain one.
func TestSpecStreamMatchesPlain(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	plain := openTiny(t, s, nil)
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "the cat sat on the mat the cat sat on the"}}
	full, _ := ask(t, plain, llm.Request{Messages: msgs, MaxTokens: 50})
	reqs := []llm.Request{{Messages: msgs, MaxTokens: 50}, {Messages: msgs, MaxTokens: 7}}
	if len(full) >= 8 {
		reqs = append(reqs, llm.Request{Messages: msgs, MaxTokens: 50, Stop: []string{full[len(full)/2 : len(full)/2+2]}})
	}
	turn2 := append(slices.Clone(msgs), llm.Message{Role: llm.RoleAssistant, Content: full}, llm.Message{Role: llm.RoleUser, Content: "the dog sat"})
	reqs = append(reqs, llm.Request{Messages: msgs, MaxTokens: 30, Conversation: "c"}, llm.Request{Messages: turn2, MaxTokens: 30, Conversation: "c"})
	for name, mod := range map[string]func(*Config){
		"lookup": func(c *Config) { c.PromptLookup = true },
		"self":   func(c *Config) { c.DraftPath = plain.cfg.ModelPath },
		"random": func(c *Config) { c.DraftPath = randomDraft(t) },
	} {
		e := openTiny(t, s, mod)
		e.spec.fixedK = 3
		for _, r := range reqs {
			want, wu := ask(t, plain, r)
			got, usage := ask(t, e, r)
			if got != want || usage.CompletionTokens != wu.CompletionTokens {
				t.Fatalf("%s, max %d stop %q conv %q: speculative answer %q (%+v), plain %q (%+v)", name, r.MaxTokens, r.Stop, r.Conversation, got, *usage, want, *wu)
			}
		}
	}
}

func TestSpecDraftVocabMismatch(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	target := writeTiny(t, s)
	bigger := s
	bigger.vocab = 512
	renamed := filepath.Join(t.TempDir(), "renamed.gguf")
	rewriteToken(t, target, renamed, 300, "▁renamed")
	for _, draft := range []string{writeTiny(t, bigger), renamed} {
		cfg := DefaultConfig()
		cfg.ModelPath, cfg.DraftPath, cfg.Threads = target, draft, 1
		e, err := Open(cfg)
		if err == nil {
			e.Close()
			t.Fatalf("draft %s: want ErrDraftVocab", draft)
		}
		if !errors.Is(err, ErrDraftVocab) {
			t.Fatalf("draft %s: error %v, want ErrDraftVocab", draft, err)
		}
		t.Log(err)
	}
}

func TestSpecDraftMissing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ModelPath, cfg.DraftPath, cfg.Threads = writeTiny(t, defaultTiny("llama", gguf.TypeF32)), filepath.Join(t.TempDir(), "absent.gguf"), 1
	if _, err := Open(cfg); !errors.Is(err, ErrModelNotFound) {
		t.Fatalf("missing draft: error %v, want ErrModelNotFound", err)
	}
}

// TestSpecCancel: cancelling between speculative rounds closes the stream,
// and the engine answers the next request exactly as before.
func TestSpecCancel(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	e := openTiny(t, s, func(c *Config) { c.DraftPath = randomDraft(t) })
	e.spec.fixedK = 3
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "the cat sat on the mat"}}, MaxTokens: 200}
	want, _ := ask(t, e, req)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	cancel()
	for range ch {
	}
	if got, _ := ask(t, e, req); got != want {
		t.Fatalf("after a cancelled request: %q, want %q", got, want)
	}
}

// rewriteToken copies a GGUF with token id's text replaced.
func rewriteToken(t *testing.T, in, out string, id int, text string) {
	f, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		switch k {
		case "tokenizer.ggml.tokens":
			toks, _ := f.Strings(k)
			toks = slices.Clone(toks)
			toks[id] = text
			w.Set(k, toks)
		case "tokenizer.ggml.scores":
			v, _ := f.Float32s(k)
			w.Set(k, v)
		case "tokenizer.ggml.token_type":
			v, _ := f.Int32s(k)
			w.Set(k, v)
		default:
			v, _ := f.Value(k)
			w.Set(k, v)
		}
	}
	for _, ti := range f.Tensors {
		_, data, _ := f.Tensor(ti.Name)
		w.AddTensor(ti.Name, ti.Type, ti.Dims, data)
	}
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
}

// TestSpecSamplingDistribution: with temperature > 0 the first two tokens
// after the prompt follow the target's distribution whatever the draft.
// The second token goes through the acceptance rule (the first is sampled
// from the prefill logits). Over N seeded runs the (t1, t2) counts are
// compared with the exact target probabilities p(t1)·p(t2|t1) by a
// chi-square test at the 0.1% level: a correct sampler fails it with
// probability 0.001, and with fixed seeds the outcome is reproducible.
// A draft whose distribution leaked into the output would shift the
// counts by far more (the random draft agrees with the target on ~1 token
// in 10).
func TestSpecSamplingDistribution(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	target := writeTiny(t, s)
	prompt := []int32{1, 260, 261, 262}
	params := samplerParams{temperature: 1.2, topK: 3, topP: 0.98, minP: 0.01, repeatPenalty: 1.2}
	const runs = 10000
	q4 := s
	q4.typ = gguf.TypeQ4_0 // the same weights at Q4_0: close to the target, not equal
	for name, draft := range map[string]string{"random": randomDraft(t), "self": target, "q4": writeTiny(t, q4)} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ModelPath, cfg.DraftPath, cfg.Threads = target, draft, 2
			e, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			e.spec.fixedK = 1
			counts := map[[2]int32]int{}
			for i := 0; i < runs; i++ {
				p := params
				p.seed = uint64(i + 1)
				ids := specIDs(t, e, prompt, p, 2, true)
				if len(ids) != 2 {
					t.Fatalf("run %d: %d tokens", i, len(ids))
				}
				counts[[2]int32{ids[0], ids[1]}]++
			}
			st := specStats(t, e)
			if st.Drafted != runs {
				t.Fatalf("drafted %d, want one per run (%d)", st.Drafted, runs)
			}
			exact := exactPairs(t, e, prompt, params)
			chi, df := chiSquare(t, counts, exact, runs)
			crit := chiSquareCritical001(df)
			t.Logf("acceptance %.2f; chi-square %.1f with %d degrees of freedom (0.1%% critical %.1f)", st.AcceptanceRate(), chi, df, crit)
			if chi > crit {
				t.Fatalf("output distribution differs from the target's: chi-square %.1f > %.1f (df %d)", chi, crit, df)
			}
		})
	}
}

// exactPairs computes p(t1)·p(t2|t1) with the target and the sampler's
// processing (the repetition window includes t1 for t2).
func exactPairs(t *testing.T, e *Engine, prompt []int32, params samplerParams) map[[2]int32]float64 {
	vocab := e.model.hp.vocab
	out := map[[2]int32]float64{}
	err := e.runOnScheduler(context.Background(), func() {
		kv := newKVCache(&e.model.hp, e.cfg.ContextSize)
		if err := e.rt.forward(context.Background(), kv, prompt, 0, nil); err != nil {
			t.Error(err)
			return
		}
		e.samp.reset(params, prompt)
		p1 := make([]float32, vocab)
		e.samp.dist(slices.Clone(e.rt.logits), p1)
		for t1, pr1 := range p1 {
			if pr1 == 0 {
				continue
			}
			if err := e.rt.forward(context.Background(), kv, []int32{int32(t1)}, len(prompt), nil); err != nil {
				t.Error(err)
				return
			}
			e.samp.reset(params, append(slices.Clone(prompt), int32(t1)))
			p2 := make([]float32, vocab)
			e.samp.dist(slices.Clone(e.rt.logits), p2)
			for t2, pr2 := range p2 {
				if pr2 > 0 {
					out[[2]int32{int32(t1), int32(t2)}] = float64(pr1) * float64(pr2)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// chiSquare pools cells expected below 5 into one and returns the
// statistic and its degrees of freedom. Observed pairs outside the
// support fail the test outright.
func chiSquare(t *testing.T, counts map[[2]int32]int, exact map[[2]int32]float64, n int) (float64, int) {
	for k, c := range counts {
		if exact[k] == 0 {
			t.Fatalf("pair %v drawn %d times but has probability 0", k, c)
		}
	}
	var chi, poolE float64
	var poolO, cells int
	for k, pr := range exact {
		exp := pr * float64(n)
		if exp < 5 {
			poolE += exp
			poolO += counts[k]
			continue
		}
		d := float64(counts[k]) - exp
		chi += d * d / exp
		cells++
	}
	if poolE > 0 {
		d := float64(poolO) - poolE
		chi += d * d / math.Max(poolE, 1)
		cells++
	}
	return chi, cells - 1
}

// chiSquareCritical001 is the 99.9% quantile of chi-square with df degrees
// of freedom (Wilson–Hilferty approximation, good to ~1% for df ≥ 3).
func chiSquareCritical001(df int) float64 {
	const z = 3.0902 // standard normal 99.9% quantile
	k := float64(df)
	a := 2 / (9 * k)
	c := 1 - a + z*math.Sqrt(a)
	return k * c * c * c
}

// TestVerifySampledRule checks the acceptance rule alone on a fixed p and
// q, for a draft model and for a point-mass (prompt lookup) proposal: the
// token returned must be distributed as p whatever was proposed.
func TestVerifySampledRule(t *testing.T) {
	p := []float32{0.5, 0.3, 0.2, 0}
	q := []float32{0.1, 0.2, 0.3, 0.4}
	samp := newSampler(len(p))
	samp.reset(samplerParams{temperature: 1, seed: 5}, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, lookup := range []bool{false, true} {
		sp := newSpeculator(len(p), nil, 0)
		if !lookup {
			sp.draft = &draftModel{}
			copy(sp.q, q)
		}
		const n = 200000
		var counts [4]int
		for i := 0; i < n; i++ {
			var d int32
			if lookup {
				d = int32(rng.IntN(3)) // any proposal, including likely and unlikely ones
			} else {
				d = samp.draw(q, 1)
			}
			copy(sp.p, p)
			counts[sp.verifySampled(samp, 0, d)]++
		}
		for i, c := range counts {
			// 5 standard deviations of a binomial count.
			sd := math.Sqrt(float64(n) * float64(p[i]) * (1 - float64(p[i])))
			if math.Abs(float64(c)-float64(n)*float64(p[i])) > 5*sd+1 {
				t.Fatalf("lookup=%v: token %d drawn %d times of %d, want %.0f±%.0f", lookup, i, c, n, float64(n)*float64(p[i]), 5*sd)
			}
		}
	}
}

func TestLookupDraft(t *testing.T) {
	h := []int32{5, 6, 7, 8, 9, 1, 6, 7, 8, 2, 3, 6, 7}
	dst := make([]int32, 3)
	// "6 7" last seen before the tail at index 6, followed by 8 2 3.
	if n := lookupDraft(h, dst, nil); n != 3 || !slices.Equal(dst, []int32{8, 2, 3}) {
		t.Fatalf("got %v (%d)", dst[:n], n)
	}
	if n := lookupDraft([]int32{1, 2, 3}, dst, nil); n != 0 {
		t.Fatalf("no repeat: got %d proposals", n)
	}
}

// A grounded prompt: "facts: volcano: a fissure in the earth <end> ...
// Question: what is a volcano ? <end> <start> assistant" and the answer so
// far "A volcano is a". The most recent "is a" (the question's) runs into
// the end of the message; the passage's "a" goes on, and is proposed.
func TestLookupDraftPrefersMatchesThatGoOn(t *testing.T) {
	const (
		end, start, assistant                             = 100, 101, 102
		facts, volcano, colon, a, fissure, in, the, earth = 1, 2, 3, 4, 5, 6, 7, 8
		question, what, is, qmark, capA                   = 9, 10, 11, 12, 13
	)
	ends := func(id int32) bool { return id >= 100 }
	prompt := []int32{facts, volcano, colon, a, fissure, in, the, earth, question, what, is, a, volcano, qmark, end, start, assistant}
	h := append(append([]int32{}, prompt...), capA, volcano, is, a)
	dst := make([]int32, 4)
	if n := lookupDraft(h, dst, ends); n != 4 || !slices.Equal(dst, []int32{fissure, in, the, earth}) {
		t.Fatalf("got %v, want the passage's continuation", dst[:n])
	}
	// Without control tokens to go by, the most recent match (the question) wins, as before.
	if n := lookupDraft(h, dst, nil); n != 4 || !slices.Equal(dst, []int32{volcano, qmark, end, start}) {
		t.Fatalf("ends == nil: got %v, want the question's continuation", dst[:n])
	}
	// When every match runs into an end, the most recent longest one is still proposed.
	h2 := []int32{what, is, end, start, what, is, end, start, capA, what, is}
	if k, n := lookupDraftN(h2, dst, ends); n != 2 || k != 4 || !slices.Equal(dst, []int32{end, start, capA, what}) {
		t.Fatalf("all ending: got %v (n=%d), want the most recent bigram's", dst[:k], n)
	}
	// A trigram match is taken even when it ends the message (quoting a sentence to its end).
	h3 := []int32{facts, a, fissure, in, the, earth, end, start, assistant, a, fissure, in, the, earth, end, fissure, in, the}
	if k, n := lookupDraftN(h3, dst, ends); n != 3 || k != 4 || !slices.Equal(dst, []int32{earth, end, fissure, in}) {
		t.Fatalf("trigram: got %v (n=%d)", dst[:k], n)
	}
}

// chooseK drafts long when proposals are kept and verification rows are
// cheap, not at all when they are rejected, and shortens drafts when the
// measured passes get dear.
func TestChooseKFollowsMeasurements(t *testing.T) {
	sp := newSpeculator(8, nil, 0.05)
	sp.passT[0] = 1e-3
	for k := 1; k <= specMaxK; k++ {
		sp.passT[k] = 1 + 0.1*float64(k) // cheap extra rows
	}
	for i := 0; i < 100; i++ {
		for j := 0; j < specMaxK; j++ {
			sp.observe(j, true)
		}
	}
	if k := sp.bestK(); k != specMaxK {
		t.Errorf("everything kept, cheap rows: k %d, want %d", k, specMaxK)
	}
	for k := 1; k <= specMaxK; k++ {
		sp.passT[k] = 1 + 0.3*float64(k) // dearer rows
	}
	for j := range sp.accAt[0] {
		sp.accAt[0][j] = 0.7
	}
	if k := sp.bestK(); k < 1 || k > 3 {
		t.Errorf("70%% kept, rows at 0.3 of a step: k %d, want 1-3", k)
	}
	for i := 0; i < 100; i++ {
		for j := 0; j < specMaxK; j++ {
			sp.observe(j, false)
		}
	}
	if k := sp.bestK(); k != 0 {
		t.Errorf("nothing kept: k %d, want 0", k)
	}
	probes := 0
	for i := 0; i < 10*minProbeGap; i++ {
		if sp.chooseK() > 0 {
			probes++
			sp.probed(1, 10*time.Millisecond) // a losing probe: slower than a plain step
		}
	}
	if probes < 3 || probes > 4 {
		t.Errorf("losing probes: %d in %d rounds, want the gap to double each time (3-4)", probes, 10*minProbeGap)
	}
	sp.probed(5, time.Millisecond) // a winning probe resets the gap
	if sp.probeGap != minProbeGap {
		t.Errorf("gap %d after a winning probe, want %d", sp.probeGap, minProbeGap)
	}
}

// passLine puts pass costs on a line through every size's measurements:
// exact for costs on a line, rising with k when one size's average is an
// outlier, and led by the sizes measured most.
func TestPassCostFitsALine(t *testing.T) {
	sp := newSpeculator(8, nil, 0.05)
	passCost := func(k int) float64 {
		a, b := sp.passLine()
		return 1 + a + b*float64(k-1)
	}
	for k := 1; k <= specMaxK; k++ {
		sp.passT[k] = 1.2 + 0.1*float64(k-1)
	}
	for k := 1; k <= specMaxK; k++ {
		if got, want := passCost(k), 1.2+0.1*float64(k-1); math.Abs(got-want) > 1e-9 {
			t.Fatalf("on a line: passCost(%d) = %v, want %v", k, got, want)
		}
	}
	sp.passT[2] = 2.5 // one noisy size: dearer than the sizes around it
	for sp.passN[3] < passFitCap {
		sp.passN[3]++
		sp.passN[5]++
	}
	prev := 1.0
	for k := 1; k <= specMaxK; k++ {
		c := passCost(k)
		if c < prev {
			t.Fatalf("passCost(%d) = %v below passCost(%d) = %v", k, c, k-1, prev)
		}
		prev = c
	}
	if c := passCost(2); c > 1.5 {
		t.Errorf("one outlier size, well-measured neighbours: passCost(2) = %v, want near 1.3", c)
	}
}

func BenchmarkSpecDecodeStep(b *testing.B) {
	// Allocation check of the speculative loop: decode b.N tokens with a
	// self-draft (allocations per token should be ~0 beyond the result).
	s := defaultTiny("llama", gguf.TypeQ8_0)
	path := writeTiny(b, s)
	cfg := DefaultConfig()
	cfg.ModelPath, cfg.DraftPath, cfg.Threads, cfg.ContextSize = path, path, 2, 512
	e, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	prompt := []int32{1, 260, 261}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var derr error
		e.runOnScheduler(context.Background(), func() {
			_, _, _, derr = e.decodeIDs(context.Background(), prompt, nil, samplerParams{}, 400, true)
		})
		if derr != nil {
			b.Fatal(derr)
		}
	}
}

// A lookup proposal ends before its first control token and after its
// first newline, and
// acceptance is measured apart for each match length: single-word matches
// that keep failing do not shorten the drafts of trigram matches.
func TestLookupStopsAndBuckets(t *testing.T) {
	pieces := []string{"", "a", " b", ".\n", "\n\n", "c"}
	stop := lookupStops(len(pieces), func(id int32) bool { return id == 0 }, func(id int32) string { return pieces[id] })
	if want := []uint8{stopBefore, 0, 0, stopAfter, stopAfter, 0}; !slices.Equal(stop, want) {
		t.Fatalf("stops %v, want %v", stop, want)
	}
	sp := newSpeculator(len(pieces), nil, 0.05)
	sp.stopAt = stop
	for _, c := range []struct {
		props []int32
		want  int
	}{{[]int32{1, 2, 5}, 3}, {[]int32{1, 3, 5, 1}, 2}, {[]int32{1, 2, 0, 1}, 2}, {[]int32{0, 1}, 0}, {nil, 0}} {
		if got := sp.cutDraft(c.props); got != c.want {
			t.Errorf("cutDraft(%v) = %d, want %d", c.props, got, c.want)
		}
	}
	sp.passT[0] = 1e-3
	for k := 1; k <= specMaxK; k++ {
		sp.passT[k] = 1 + 0.1*float64(k)
	}
	for i := 0; i < 100; i++ {
		for j := 0; j < specMaxK; j++ {
			sp.bucket = 1
			sp.observe(j, false)
			sp.bucket = 3
			sp.observe(j, true)
		}
	}
	sp.bucket = 1
	if k := sp.bestK(); k != 0 {
		t.Errorf("single-word matches never kept: k %d, want 0", k)
	}
	sp.bucket = 3
	if k := sp.bestK(); k != specMaxK {
		t.Errorf("trigram matches always kept: k %d, want %d", k, specMaxK)
	}
	// Depths never reached are expected to go as the last one reached,
	// not as the prior.
	sp.bucket = 2
	for i := 0; i < 50; i++ {
		sp.observe(0, true)
		sp.observe(1, true)
	}
	if k := sp.bestK(); k != specMaxK {
		t.Errorf("bigram matches kept at the two depths tried: k %d, want %d", k, specMaxK)
	}
}

// TestEmaTime: a slower measurement moves a cost an eighth as far as a
// faster one.
func TestEmaTime(t *testing.T) {
	v := 1.0
	emaTime(&v, 2)
	if want := 1 + timeWeight/8; v != want {
		t.Fatalf("after a slow pass %v, want %v", v, want)
	}
	v = 1
	emaTime(&v, 0.5)
	if want := 1 - timeWeight*0.5; v != want {
		t.Fatalf("after a fast pass %v, want %v", v, want)
	}
}
