package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// demoModels returns the bundled demo target and draft, skipping when absent.
func demoModels(t testing.TB) (target, draft string) {
	t.Helper()
	dir := testenv.RepoRoot(t)
	target = filepath.Join(dir, "models", "voxpipe-demo-q8_0.gguf")
	draft = filepath.Join(dir, "models", "voxpipe-demo-draft-q8_0.gguf")
	for _, p := range []string{target, draft} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("demo model %s missing: %v", p, err)
		}
	}
	return target, draft
}

// BenchmarkDemoStepCost measures the forward-pass costs speculative
// decoding and batching trade: the target at 1..16 tokens per pass (100
// positions in) with Q8_0 weights repacked for the batched kernels and in
// the file's row layout, and the draft at 1, on the demo models at 2
// threads. Read time(n)/time(1).
func BenchmarkDemoStepCost(b *testing.B) {
	target, draft := demoModels(b)
	type stepCase struct {
		name    string
		path    string
		n       int
		repack  bool
		threads int
	}
	var cases []stepCase
	for _, repack := range []bool{true, false} {
		layout := "packed"
		if !repack {
			layout = "rows"
		}
		for _, n := range []int{1, 2, 3, 5, 9, 16} {
			cases = append(cases, stepCase{fmt.Sprintf("target/%s/n=%d", layout, n), target, n, repack, 2})
		}
	}
	cases = append(cases, stepCase{"draft/packed/n=1", draft, 1, true, 2}, stepCase{"draft/packed/n=1/threads=1", draft, 1, true, 1})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			_, m := testModelLayout(b, c.path, c.repack)
			m.hp.kvHalf = m.quantized() // the engine's default KV cache
			rt := newCompute(m, c.threads, 1024, defaultBatch)
			defer rt.close()
			kv := newKVCache(&m.hp, 1024)
			prompt := make([]int32, 100)
			for i := range prompt {
				prompt[i] = int32(i * 7 % m.hp.vocab)
			}
			if err := rt.forward(context.Background(), kv, prompt, 0, nil); err != nil {
				b.Fatal(err)
			}
			all := make([]float32, c.n*m.hp.vocab)
			batch := prompt[:c.n]
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				var out []float32
				if c.n > 1 {
					out = all
				}
				if err := rt.forward(context.Background(), kv, batch, 100, out); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time per pass stays comparable when other jobs share the machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

var demoQuestions = []string{
	"What is a compiler?", "What does the word harbour mean?", "What is an operating system kernel?",
	"What is a database?", "What does ephemeral mean?", "What is a network protocol?",
	"What is an algorithm?", "What does the word lantern mean?",
}

var demoQuotes = []string{
	"Repeat after me: the quick brown fox jumps over the lazy dog near the quiet river bank.",
	"Repeat after me: a compiler translates source code into machine code that a computer can run.",
	"Repeat after me: please remind me to buy milk, eggs and bread on the way home tonight.",
	"Repeat after me: the meeting with the design team has moved to Thursday at three in the afternoon.",
}

// demoGrounded are knowledge prompts as the server sends them (voxpipe
// knowledge query --augment): the answers quote the passage after
// restating the question, some not as the likely opening has it ("An apple
// is fruit ...", "A candle is stick ...").
var demoGrounded = []string{
	"Facts that may help:\nvolcano: a fissure in the earth's crust through which molten lava and gases erupt\n\nQuestion: What is a volcano?",
	"Facts that may help:\napple: fruit with red or yellow or green skin and sweet to tart crisp whitish flesh\nAPPLE: A revision of APL for the Illiac IV.\n\nQuestion: What is an apple?",
	"Facts that may help:\ncandle: stick of wax with a wick in the middle\nCandle: Part of the Scorpion environment development system.\n\nQuestion: What is a candle?",
	"Facts that may help:\nbread: food made from dough of flour or meal and usually raised with yeast or baking powder and then baked\nbread: cover with bread crumbs\n\nQuestion: What is bread?",
	"Facts that may help:\nMoon: the natural satellite of the Earth\nmoon: have dreamlike musings or fantasies while awake\n\nQuestion: What is the moon?",
}

func demoConvs(questions []string) [][]llm.Message {
	convs := make([][]llm.Message, len(questions))
	for i, q := range questions {
		convs[i] = []llm.Message{
			{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."},
			{Role: llm.RoleUser, Content: q},
		}
	}
	return convs
}

// demoSelfDraft writes the target at Q4_0 (the self-draft).
func demoSelfDraft(t testing.TB, target string) string {
	path := filepath.Join(t.TempDir(), "demo-q4_0.gguf")
	if err := quant.QuantizeFile(target, path, gguf.TypeQ4_0); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDemoSpecGreedyIdentical: on the bundled demo models, speculative
// greedy answers (draft model, Q4_0 self-draft, prompt lookup) equal the
// plain ones token for token.
func TestDemoSpecGreedyIdentical(t *testing.T) {
	target, draft := demoModels(t)
	cases := []struct {
		name      string
		mod       func(*Config)
		questions []string
	}{
		{"draft", func(c *Config) { c.DraftPath = draft }, demoQuestions[:3]},
		{"self-q4", func(c *Config) { c.DraftPath = demoSelfDraft(t, target) }, demoQuestions[3:5]},
		{"lookup", func(c *Config) { c.PromptLookup = true }, demoQuotes[:2]},
		// Adaptive k, answer openings and learnt corrections (the full stop
		// proposed where the passage has a newline), each grounded answer
		// twice so the corrections are in use the second time.
		{"lookup-grounded", func(c *Config) { c.PromptLookup = true }, append(demoGrounded, demoGrounded...)},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		cfg.ModelPath, cfg.Threads, cfg.RepeatPenalty = target, 2, 1
		c.mod(&cfg)
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.name != "lookup-grounded" {
			e.spec.fixedK = 4 // exercise verification whatever the calibration says
		}
		res, err := e.BenchSpec(context.Background(), demoConvs(c.questions), 64, 1)
		subs := 0
		if e.spec.subN != nil {
			for _, n := range e.spec.subN {
				if n >= subMin {
					subs++
				}
			}
		}
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d tokens, acceptance %.2f, answer %q", c.name, res.DecodeTokens, res.Stats.AcceptanceRate(), res.Answers[0])
		if !res.Identical {
			t.Fatalf("%s: speculative greedy answers differ from plain", c.name)
		}
		if res.Stats.Drafted == 0 {
			t.Fatalf("%s: nothing drafted", c.name)
		}
		if c.name == "lookup-grounded" && (!e.spec.accSeen[bucketOpening][0] || subs == 0) {
			t.Fatalf("%s: openings measured %v, %d corrections learnt: the grounded paths were not exercised", c.name, e.spec.accSeen[bucketOpening][0], subs)
		}
	}
}

// BenchmarkDemoSpec reports plain vs speculative greedy decoding on the
// demo models at 2 threads: a ChatML question workload for the draft and
// the Q4_0 self-draft, a quoting workload for prompt lookup.
func BenchmarkDemoSpec(b *testing.B) {
	target, draft := demoModels(b)
	selfDraft := demoSelfDraft(b, target)
	cases := []struct {
		name      string
		mod       func(*Config)
		questions []string
		fixedK    int // 0: adaptive
	}{
		{"draft", func(c *Config) { c.DraftPath = draft }, demoQuestions, 0},
		{"draft-k3", func(c *Config) { c.DraftPath = draft }, demoQuestions, 3},
		{"self-q4", func(c *Config) { c.DraftPath = selfDraft }, demoQuestions, 0},
		{"self-q4-k4", func(c *Config) { c.DraftPath = selfDraft }, demoQuestions, 4},
		{"lookup", func(c *Config) { c.PromptLookup = true }, demoQuotes, 0},
		{"lookup-questions", func(c *Config) { c.PromptLookup = true }, demoQuestions, 0},
		{"lookup-asked-again", func(c *Config) { c.PromptLookup = true }, nil, 0},
		{"lookup-asked-again-k8", func(c *Config) { c.PromptLookup = true }, nil, 8},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.ModelPath, cfg.Threads, cfg.RepeatPenalty = target, 2, 1
			c.mod(&cfg)
			e, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			e.spec.fixedK = c.fixedK
			convs := demoConvs(c.questions)
			if c.questions == nil {
				convs = askedAgain(b, e, demoQuestions)
			}
			var sum SpecBenchResult
			identical := true
			for i := 0; i < b.N; i++ {
				res, err := e.BenchSpec(context.Background(), convs, 128, 1)
				if err != nil {
					b.Fatal(err)
				}
				sum.DecodeTokens += res.DecodeTokens
				sum.PlainTime += res.PlainTime
				sum.SpecTime += res.SpecTime
				sum.Stats.Drafted += res.Stats.Drafted
				sum.Stats.Accepted += res.Stats.Accepted
				sum.Stats.Rounds += res.Stats.Rounds
				identical = identical && res.Identical
			}
			if !identical {
				b.Fatal("speculative greedy answers differ from plain")
			}
			b.ReportMetric(sum.Speedup(), "speedup")
			b.ReportMetric(sum.PlainTokensPerSecond(), "plain-tok/s")
			b.ReportMetric(sum.SpecTokensPerSecond(), "spec-tok/s")
			b.ReportMetric(100*sum.Stats.AcceptanceRate(), "accept-%")
			b.ReportMetric(sum.Stats.MeanAccepted(), "accepted/pass")
			b.ReportMetric(e.spec.passT[1], "T2/T1")
			b.ReportMetric(e.spec.passT[2]-e.spec.passT[1], "verify-cost/row")
			b.ReportMetric(e.spec.draftT, "draft-cost")
		})
	}
}

// askedAgain builds conversations where the user repeats a question the
// assistant has just answered (its own greedy answer is in the history):
// the second answer quotes the first, the case prompt lookup is for.
func askedAgain(t testing.TB, e *Engine, questions []string) [][]llm.Message {
	convs := demoConvs(questions)
	for i, msgs := range convs {
		ch, err := e.Stream(context.Background(), llm.Request{Messages: msgs, MaxTokens: 128})
		if err != nil {
			t.Fatal(err)
		}
		var answer string
		for tok := range ch {
			if tok.Err != nil {
				t.Fatal(tok.Err)
			}
			answer += tok.Text
		}
		convs[i] = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: answer}, msgs[len(msgs)-1])
	}
	return convs
}

// BenchmarkDemoBatchStep measures one continuous-batching decode step: s
// sequences, one row each, 100 positions in, each with its own KV cache,
// logits for every row. Read time(s)/time(1): aggregate speed-up is
// s·time(1)/time(s).
//
// VOXPIPE_BENCH_MODEL=path runs it on another model (e.g. one made with
// "voxpipe llm synth --shape smollm2-135m").
func BenchmarkDemoBatchStep(b *testing.B) {
	target := os.Getenv("VOXPIPE_BENCH_MODEL")
	if target == "" {
		target, _ = demoModels(b)
	}
	_, m := testModelLayout(b, target, true)
	m.hp.kvHalf = m.quantized() // the engine's default KV cache
	rt := newCompute(m, 2, 256, defaultBatch)
	defer rt.close()
	const pos = 100
	prompt := make([]int32, pos)
	for i := range prompt {
		prompt[i] = int32(i * 7 % m.hp.vocab)
	}
	for _, s := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("seqs=%d", s), func(b *testing.B) {
			segs := make([]segment, s)
			tokens := make([]int32, s)
			for i := range segs {
				kv := newKVCache(&m.hp, 256)
				if err := rt.forward(context.Background(), kv, prompt, 0, nil); err != nil {
					b.Fatal(err)
				}
				segs[i] = segment{kv: kv, pos0: pos, start: i, n: 1}
				tokens[i] = int32(i)
			}
			out := make([]float32, s*m.hp.vocab)
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if err := rt.forwardBatch(context.Background(), tokens, segs, rt.rowIdx[:s], out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
