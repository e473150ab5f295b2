// Package llmcli is the `llm` command line of voxpipe (run, bench, quantize, eval, synth) over the
// in-process engine. It imports the engine and no part of the voice stack, so cmd/voxllm serves
// the same commands from a binary without voxpipe's audio libraries (a static build runs on a
// bare machine: `go build -ldflags=-extldflags=-static ./cmd/voxllm`).
package llmcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
	"github.com/voxpipe/voxpipe/llm/engine/synth"
)

const llmUsage = `usage: voxpipe llm <command> [flags]   (or voxllm <command> [flags])

commands:
  run       --model M [--prompt P | --chat] [--max-tokens N] [--temp T] [--threads N] [--draft D | --lookup]
  bench     --model M [--threads N] [--prompt-tokens 512] [--decode-tokens 128] [--json] [--no-repack] [--kv-f32]
            [--draft D | --lookup] [--question Q ...] [--spec-tokens 128] [--spec-repeat 5] [--spec-k K]
            speculative decoding: plain vs speculative greedy answers to ChatML questions
            [--concurrency 1,2,4,8,16]   continuous batching: aggregate and per-sequence speed
  quantize  IN OUT --type q8_0|q4_0|f16|f32
  eval      --model M --file F [--draft D] [--limit N] [--json]   perplexity (and draft agreement) on held-out text
  synth     --shape smollm2-135m|qwen2.5-0.5b|llama-1b --type f32|q8_0|q4_0 [--seed S] OUT`

// ErrUsage marks a command-line mistake; the message is the usage text.
var ErrUsage = errors.New("usage error")

// Run dispatches `voxpipe llm <command>` (args start with the command), reading chat input from in
// and writing results to out. A command-line mistake returns an error that wraps ErrUsage.
func Run(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", ErrUsage, llmUsage)
	}
	switch args[0] {
	case "run":
		return llmRun(ctx, args[1:], in, out)
	case "bench":
		return llmBench(ctx, args[1:], out)
	case "quantize":
		return llmQuantize(args[1:])
	case "synth":
		return llmSynth(args[1:])
	case "eval":
		return llmEval(ctx, args[1:], out)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(out, llmUsage)
		return err
	}
	return fmt.Errorf("%w: unknown llm command %q\n%s", ErrUsage, args[0], llmUsage)
}

// ParseFlags parses flags that may come before or after positional
// arguments and returns the positionals.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: llm %s: %w\n%s", ErrUsage, fs.Name(), err, llmUsage)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// specFlags select speculative decoding (run and bench; eval has its own --draft).
type specFlags struct {
	draft  string
	lookup bool
}

func (f *specFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.draft, "draft", "", "draft model for speculative decoding (same vocabulary)")
	fs.BoolVar(&f.lookup, "lookup", false, "speculative decoding with prompt-lookup drafts")
}

func (f *specFlags) apply(cfg *engine.Config) error {
	if f.draft != "" && f.lookup {
		return fmt.Errorf("%w: --draft and --lookup exclude each other\n%s", ErrUsage, llmUsage)
	}
	cfg.DraftPath = f.draft
	cfg.PromptLookup = f.lookup
	return nil
}

// engineFlags are the flags run and bench share.
type engineFlags struct {
	model    string
	threads  int
	ctxSize  int
	template string
}

func (f *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "GGUF model file")
	fs.IntVar(&f.threads, "threads", 0, "worker threads (0 = all CPUs)")
	fs.IntVar(&f.ctxSize, "ctx", 0, "context size in tokens (0 = model's, at most 4096)")
	fs.StringVar(&f.template, "template", "", "chat template: chatml|llama3|llama2|raw (default: from the model)")
}

func (f *engineFlags) config() (engine.Config, error) {
	if f.model == "" {
		return engine.Config{}, fmt.Errorf("%w: --model is required\n%s", ErrUsage, llmUsage)
	}
	cfg := engine.DefaultConfig()
	cfg.ModelPath = f.model
	if f.threads > 0 {
		cfg.Threads = f.threads
	}
	cfg.ContextSize = f.ctxSize
	cfg.ChatTemplate = f.template
	return cfg, nil
}

func llmRun(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var ef engineFlags
	ef.register(fs)
	var sf specFlags
	sf.register(fs)
	prompt := fs.String("prompt", "", "prompt (one user message)")
	chatMode := fs.Bool("chat", false, "interactive chat over stdin")
	system := fs.String("system", "", "system prompt")
	maxTokens := fs.Int("max-tokens", 256, "maximum tokens to generate")
	temp := fs.Float64("temp", 0.7, "sampling temperature (0 = greedy)")
	topK := fs.Int("top-k", 40, "top-k (0 = off)")
	topP := fs.Float64("top-p", 0.95, "top-p (0 = off)")
	seed := fs.Uint64("seed", 0, "sampling seed (0 = random)")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: llm run: unexpected argument %q\n%s", ErrUsage, pos[0], llmUsage)
	}
	if *prompt == "" && !*chatMode {
		return fmt.Errorf("%w: llm run needs --prompt or --chat\n%s", ErrUsage, llmUsage)
	}
	cfg, err := ef.config()
	if err != nil {
		return err
	}
	if err := sf.apply(&cfg); err != nil {
		return err
	}
	e, err := engine.Open(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Fprintln(os.Stderr, "loaded:", e.Info()) // stdout is the answer
	req := llm.Request{MaxTokens: *maxTokens, Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), Seed: *seed}
	var history []llm.Message
	if *system != "" {
		history = append(history, llm.Message{Role: llm.RoleSystem, Content: *system})
	}
	if !*chatMode {
		req.Messages = append(history, llm.Message{Role: llm.RoleUser, Content: *prompt})
		_, err := streamTo(ctx, e, req, out)
		fmt.Fprintln(out)
		return err
	}
	req.Conversation = "cli"
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		fmt.Fprint(out, "> ")
		if !lines.Scan() {
			fmt.Fprintln(out)
			return lines.Err()
		}
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		history = append(history, llm.Message{Role: llm.RoleUser, Content: line})
		req.Messages = history
		answer, err := streamTo(ctx, e, req, out)
		fmt.Fprintln(out)
		if err != nil {
			return err
		}
		history = append(history, llm.Message{Role: llm.RoleAssistant, Content: answer})
	}
}

// streamTo prints a streamed answer and returns its text.
func streamTo(ctx context.Context, m llm.Model, req llm.Request, out io.Writer) (string, error) {
	ch, err := m.Stream(ctx, req)
	if err != nil {
		return "", err
	}
	var answer strings.Builder
	for tok := range ch {
		if tok.Err != nil {
			return answer.String(), tok.Err
		}
		answer.WriteString(tok.Text)
		if _, err := io.WriteString(out, tok.Text); err != nil {
			return answer.String(), err
		}
	}
	if err := ctx.Err(); err != nil {
		return answer.String(), err
	}
	return answer.String(), nil
}

// benchReport is the --json output of llm bench.
type benchReport struct {
	Model            string  `json:"model"`
	Threads          int     `json:"threads"`
	GOMAXPROCS       int     `json:"gomaxprocs"` // procs.SpareForCgo: more than the cores, or the scheduler takes the kernels' Ps
	Kernels          string  `json:"kernels"`
	PromptTokens     int     `json:"prompt_tokens"`
	DecodeTokens     int     `json:"decode_tokens"`
	PromptTokensPerS float64 `json:"prompt_tokens_per_s"`
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
	TTFTMs           float64 `json:"ttft_ms"`
	LoadMs           float64 `json:"load_ms"`
	PromptCPUSeconds float64 `json:"prompt_cpu_s"`
	DecodeCPUSeconds float64 `json:"decode_cpu_s"`
	PeakRSSBytes     int64   `json:"peak_rss_bytes"`
	// The bandwidth probe (Engine.BenchBandwidth): a plain streaming read of
	// the weights a decode step reads, on the engine's threads in the
	// decode's chunks, best of 3 passes before and 3 after the bench;
	// decode_fraction = decode speed × decode_bytes / it.
	DecodeBytes    int64        `json:"decode_bytes"`
	BandwidthGBs   float64      `json:"bandwidth_gb_s"`
	DecodeGBs      float64      `json:"decode_gb_s"`
	DecodeFraction float64      `json:"decode_fraction"`
	Spec           *specReport  `json:"speculative,omitempty"`
	Concurrency    []concReport `json:"concurrency,omitempty"`
}

// concReport is one row of llm bench --concurrency.
type concReport struct {
	Sequences        int     `json:"sequences"`
	AggregateTokensS float64 `json:"aggregate_tokens_per_s"`
	AggregateSpeedup float64 `json:"aggregate_vs_one"` // aggregate over the first row's (1 sequence)
	TokenDelayMs     float64 `json:"token_delay_ms"`   // per sequence, between tokens
	DelayGrowth      float64 `json:"delay_vs_one"`
	TTFTMs           float64 `json:"ttft_ms"` // per sequence, prompt included
}

// specReport is the speculative part of llm bench.
type specReport struct {
	Drafter         string  `json:"drafter"` // draft | lookup
	Draft           string  `json:"draft,omitempty"`
	Prompts         int     `json:"prompts"`
	Repeats         int     `json:"repeats"` // times the question set was answered in each mode
	DecodeTokens    int     `json:"decode_tokens"`
	PlainTokensPerS float64 `json:"plain_tokens_per_s"`
	SpecTokensPerS  float64 `json:"spec_tokens_per_s"`
	Speedup         float64 `json:"speedup"`
	AcceptanceRate  float64 `json:"acceptance_rate"`
	MeanAccepted    float64 `json:"mean_accepted"`
	TokensPerRound  float64 `json:"tokens_per_target_pass"`
	Identical       bool    `json:"identical"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
	Rounds          int     `json:"rounds"`
}

// StringList is a repeatable string flag.
type StringList []string

func (l *StringList) String() string     { return strings.Join(*l, " | ") }
func (l *StringList) Set(v string) error { *l = append(*l, v); return nil }

// benchSystemPrompt is the demo models' training system prompt (configs/default.yaml).
const benchSystemPrompt = "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."

// Default speculative-bench workloads: questions the demo assistant
// answers at length, and a quoting workload where prompt lookup can help.
var (
	benchQuestions = []string{
		"What is a compiler?", "What does the word harbour mean?", "What is an operating system kernel?",
		"What is a database?", "What does ephemeral mean?", "What is a network protocol?",
		"What is an algorithm?", "What does the word lantern mean?",
	}
	benchQuotes = []string{
		"Repeat after me: the quick brown fox jumps over the lazy dog near the quiet river bank.",
		"Repeat after me: a compiler translates source code into machine code that a computer can run.",
		"Repeat after me: please remind me to buy milk, eggs and bread on the way home tonight.",
		"Repeat after me: the meeting with the design team has moved to Thursday at three in the afternoon.",
	}
)

func llmBench(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var ef engineFlags
	ef.register(fs)
	promptTokens := fs.Int("prompt-tokens", 512, "prompt length")
	decodeTokens := fs.Int("decode-tokens", 128, "tokens to decode")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var sf specFlags
	sf.register(fs)
	var questions StringList
	fs.Var(&questions, "question", "a user question for the speculative bench (repeatable; default: built-in set)")
	specTokens := fs.Int("spec-tokens", 128, "maximum answer tokens per question in the speculative bench")
	specRepeat := fs.Int("spec-repeat", 5, "times the speculative bench answers the question set in each mode (a steadier ratio on a noisy machine)")
	specK := fs.Int("spec-k", 0, "proposals per speculative round, 1-8 (0: chosen from measurements)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	concurrency := fs.String("concurrency", "", "continuous batching: comma-separated sequence counts decoded at once, e.g. 1,2,4,8,16")
	noRepack := fs.Bool("no-repack", false, "keep Q8_0 and Q4_0 weights in the file layout (row kernels), to compare")
	kvF32 := fs.Bool("kv-f32", false, "keep the KV cache in float32 (quantized models default to fp16), to compare")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: llm bench: unexpected argument %q\n%s", ErrUsage, pos[0], llmUsage)
	}
	cfg, err := ef.config()
	if err != nil {
		return err
	}
	if err := sf.apply(&cfg); err != nil {
		return err
	}
	cfg.NoRepack = *noRepack
	cfg.KVF32 = *kvF32
	if *specRepeat < 1 {
		return fmt.Errorf("%w: llm bench: --spec-repeat wants 1 or more, got %d\n%s", ErrUsage, *specRepeat, llmUsage)
	}
	if *specK < 0 || *specK > 8 {
		return fmt.Errorf("%w: llm bench: --spec-k wants 0 to 8, got %d\n%s", ErrUsage, *specK, llmUsage)
	}
	cfg.SpecK = *specK
	var counts []int
	if *concurrency != "" {
		for _, f := range strings.Split(*concurrency, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 64 {
				return fmt.Errorf("%w: llm bench: --concurrency wants counts from 1 to 64, got %q\n%s", ErrUsage, f, llmUsage)
			}
			counts = append(counts, n)
			cfg.Sequences = max(cfg.Sequences, n)
			cfg.QueueSize = max(cfg.QueueSize, n)
		}
	}
	if cfg.ContextSize == 0 {
		cfg.ContextSize = *promptTokens + *decodeTokens
		if cfg.DraftPath != "" || cfg.PromptLookup {
			cfg.ContextSize = 0 // the model's: chat prompts plus answers
		}
	}
	start := time.Now()
	e, err := engine.Open(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	load := time.Since(start)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if len(counts) > 0 {
		return benchConcurrency(ctx, e, cfg, counts, *promptTokens, *decodeTokens, *asJSON, out)
	}
	// The bandwidth probe runs just before and just after the bench, three
	// passes each, so its best pass comes from the same minutes as the
	// decoding it is compared with (on a machine whose other cores are busy
	// the read limit moves from minute to minute).
	bw0, err := e.BenchBandwidth(ctx, 3)
	if err != nil {
		return err
	}
	res, err := e.Bench(ctx, *promptTokens, *decodeTokens)
	if err != nil {
		return err
	}
	rep := benchReport{
		Model:            cfg.ModelPath,
		Threads:          res.Threads,
		GOMAXPROCS:       runtime.GOMAXPROCS(0),
		Kernels:          res.Kernels,
		PromptTokens:     res.PromptTokens,
		DecodeTokens:     res.DecodeTokens,
		PromptTokensPerS: res.PromptTokensPerSecond(),
		DecodeTokensPerS: res.DecodeTokensPerSecond(),
		TTFTMs:           float64(res.TTFT.Microseconds()) / 1000,
		LoadMs:           float64(load.Microseconds()) / 1000,
		PromptCPUSeconds: res.PromptCPU.Seconds(),
		DecodeCPUSeconds: res.DecodeCPU.Seconds(),
		PeakRSSBytes:     peakRSS(),
	}
	bw, err := e.BenchBandwidth(ctx, 3)
	if err != nil {
		return err
	}
	bw.BytesPerSecond = max(bw.BytesPerSecond, bw0.BytesPerSecond)
	rep.DecodeBytes = bw.DecodeBytes
	rep.BandwidthGBs = bw.BytesPerSecond / 1e9
	rep.DecodeGBs = res.DecodeTokensPerSecond() * float64(bw.DecodeBytes) / 1e9
	if bw.BytesPerSecond > 0 {
		rep.DecodeFraction = rep.DecodeGBs / rep.BandwidthGBs
	}
	if cfg.DraftPath != "" || cfg.PromptLookup {
		if len(questions) == 0 {
			questions = benchQuestions
			if cfg.PromptLookup {
				questions = benchQuotes
			}
		}
		convs := make([][]llm.Message, len(questions))
		for i, q := range questions {
			convs[i] = []llm.Message{{Role: llm.RoleSystem, Content: benchSystemPrompt}, {Role: llm.RoleUser, Content: q}}
		}
		sr, err := e.BenchSpec(ctx, convs, *specTokens, *specRepeat)
		if err != nil {
			return err
		}
		rep.Spec = &specReport{
			Drafter: sr.Drafter, Draft: cfg.DraftPath, Prompts: sr.Prompts, Repeats: *specRepeat, DecodeTokens: sr.DecodeTokens,
			PlainTokensPerS: sr.PlainTokensPerSecond(), SpecTokensPerS: sr.SpecTokensPerSecond(), Speedup: sr.Speedup(),
			AcceptanceRate: sr.Stats.AcceptanceRate(), MeanAccepted: sr.Stats.MeanAccepted(), Identical: sr.Identical,
			Drafted: sr.Stats.Drafted, Accepted: sr.Stats.Accepted, Rounds: sr.Stats.Rounds,
		}
		if sr.Stats.Rounds > 0 {
			rep.Spec.TokensPerRound = 1 + sr.Stats.MeanAccepted()
		}
		rep.PeakRSSBytes = peakRSS()
		if !*asJSON && len(sr.Answers) > 0 {
			fmt.Fprintf(out, "sample   %q -> %q\n", questions[0], sr.Answers[0])
		}
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	fmt.Fprintf(out, "model    %s (%d threads, %s kernels, GOMAXPROCS %d)\n", rep.Model, rep.Threads, rep.Kernels, rep.GOMAXPROCS)
	fmt.Fprintf(out, "loaded   %s\n", e.Info())
	fmt.Fprintf(out, "load     %.0f ms\n", rep.LoadMs)
	fmt.Fprintf(out, "prompt   %d tokens: %.1f tokens/s (%.2f CPU-s)\n", rep.PromptTokens, rep.PromptTokensPerS, rep.PromptCPUSeconds)
	fmt.Fprintf(out, "ttft     %.1f ms\n", rep.TTFTMs)
	fmt.Fprintf(out, "decode   %d tokens: %.1f tokens/s (%.2f CPU-s)\n", rep.DecodeTokens, rep.DecodeTokensPerS, rep.DecodeCPUSeconds)
	fmt.Fprintf(out, "memory   %.1f MB read per step: %.2f GB/s of a %.2f GB/s plain read (%.0f%%)\n",
		float64(rep.DecodeBytes)/1e6, rep.DecodeGBs, rep.BandwidthGBs, 100*rep.DecodeFraction)
	if sp := rep.Spec; sp != nil {
		fmt.Fprintf(out, "spec     %s over %d questions x %d, %d answer tokens, greedy identical: %v\n", sp.Drafter, sp.Prompts, sp.Repeats, sp.DecodeTokens, sp.Identical)
		fmt.Fprintf(out, "         plain %.1f tokens/s, speculative %.1f tokens/s: speedup %.2fx\n", sp.PlainTokensPerS, sp.SpecTokensPerS, sp.Speedup)
		fmt.Fprintf(out, "         acceptance %.1f%% (%d of %d drafted), mean accepted %.2f per pass (%d passes)\n", 100*sp.AcceptanceRate, sp.Accepted, sp.Drafted, sp.MeanAccepted, sp.Rounds)
	}
	fmt.Fprintf(out, "peak RSS %.1f MiB\n", float64(rep.PeakRSSBytes)/(1<<20))
	return nil
}

// benchConcurrency runs the continuous-batching bench for each count and
// prints aggregate throughput and per-sequence delay against the first.
func benchConcurrency(ctx context.Context, e *engine.Engine, cfg engine.Config, counts []int, promptTokens, decodeTokens int, asJSON bool, out io.Writer) error {
	rep := benchReport{Model: cfg.ModelPath, Threads: cfg.Threads, GOMAXPROCS: runtime.GOMAXPROCS(0), Kernels: kernels.Features(), PromptTokens: promptTokens, DecodeTokens: decodeTokens}
	for i, n := range counts {
		r, err := e.BenchConcurrent(ctx, n, promptTokens, decodeTokens)
		if err != nil {
			return err
		}
		c := concReport{
			Sequences: n, AggregateTokensS: r.AggregateTokensPerS,
			TokenDelayMs: float64(r.MeanTokenDelay.Microseconds()) / 1000, TTFTMs: float64(r.MeanTTFT.Microseconds()) / 1000,
		}
		if i > 0 {
			c.AggregateSpeedup = c.AggregateTokensS / rep.Concurrency[0].AggregateTokensS
			c.DelayGrowth = c.TokenDelayMs / rep.Concurrency[0].TokenDelayMs
		} else {
			c.AggregateSpeedup, c.DelayGrowth = 1, 1
		}
		rep.Concurrency = append(rep.Concurrency, c)
	}
	rep.PeakRSSBytes = peakRSS()
	if asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	fmt.Fprintf(out, "model    %s (%d threads, %s kernels, GOMAXPROCS %d), prompt %d, decode %d tokens per sequence\n", rep.Model, rep.Threads, rep.Kernels, rep.GOMAXPROCS, promptTokens, decodeTokens)
	fmt.Fprintf(out, "%9s %14s %9s %15s %9s %10s\n", "sequences", "aggregate t/s", "vs first", "ms/token (seq)", "vs first", "ttft ms")
	for _, c := range rep.Concurrency {
		fmt.Fprintf(out, "%9d %14.1f %8.2fx %15.2f %8.2fx %10.1f\n", c.Sequences, c.AggregateTokensS, c.AggregateSpeedup, c.TokenDelayMs, c.DelayGrowth, c.TTFTMs)
	}
	fmt.Fprintf(out, "peak RSS %.1f MiB\n", float64(rep.PeakRSSBytes)/(1<<20))
	return nil
}

// peakRSS is the process's peak resident set (Linux reports KiB).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) * 1024
}

func parseType(s string, allowed ...gguf.Type) (gguf.Type, error) {
	for _, t := range allowed {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	names := make([]string, len(allowed))
	for i, t := range allowed {
		names[i] = strings.ToLower(t.String())
	}
	return 0, fmt.Errorf("%w: --type %q (want %s)\n%s", ErrUsage, s, strings.Join(names, "|"), llmUsage)
}

func llmQuantize(args []string) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	typName := fs.String("type", "q8_0", "q8_0|q4_0|f16|f32")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: llm quantize needs IN and OUT\n%s", ErrUsage, llmUsage)
	}
	typ, err := parseType(*typName, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeF16, gguf.TypeF32)
	if err != nil {
		return err
	}
	return quant.QuantizeFile(pos[0], pos[1], typ)
}

func llmSynth(args []string) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	shape := fs.String("shape", "", "smollm2-135m|qwen2.5-0.5b|llama-1b")
	typName := fs.String("type", "q8_0", "f32|q8_0|q4_0")
	seed := fs.Int64("seed", 1, "random seed")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *shape == "" {
		return fmt.Errorf("%w: llm synth needs --shape and OUT\n%s", ErrUsage, llmUsage)
	}
	typ, err := parseType(*typName, gguf.TypeF32, gguf.TypeQ8_0, gguf.TypeQ4_0)
	if err != nil {
		return err
	}
	return synth.Write(pos[0], *shape, typ, *seed)
}
