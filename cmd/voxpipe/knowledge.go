package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/llmcli"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/tokenizer"
	"github.com/voxpipe/voxpipe/llm/knowledge"
	"github.com/voxpipe/voxpipe/llm/knowledge/store"
)

const knowledgeUsage = `usage: voxpipe knowledge index|query [flags]

  index   build (or check) the cached index of knowledge.sources
  query   look questions up: arguments, --file F (one a line), or stdin
          --json prints one JSON object a question; --augment adds the
          exact user message the server would send
`

func runKnowledge(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, knowledgeUsage)
		return fmt.Errorf("%w: knowledge needs a subcommand", errCommandLine)
	}
	switch args[0] {
	case "index":
		return knowledgeIndex(ctx, args[1:], os.Stdout)
	case "query":
		return knowledgeQuery(ctx, args[1:], os.Stdin, os.Stdout)
	case "-h", "-help", "--help", "help":
		fmt.Print(knowledgeUsage)
		return nil
	}
	fmt.Fprint(os.Stderr, knowledgeUsage)
	return fmt.Errorf("%w: unknown knowledge subcommand %q", errCommandLine, args[0])
}

// knowledgeFlags are the flags both subcommands share.
type knowledgeFlags struct {
	config  string
	sets    setFlags
	sources llmcli.StringList
}

func (f *knowledgeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", defaultConfigPath, "YAML config file (its knowledge section)")
	fs.Var(&f.sets, "set", "override one config key, e.g. --set knowledge.top_k=3 (repeatable)")
	fs.Var(&f.sources, "source", "a source instead of knowledge.sources (a folder or \"dictionary\"; repeatable)")
}

func (f *knowledgeFlags) load() (*config.Config, error) {
	cfg, err := loadConfig(f.config, "", f.sets)
	if err != nil {
		return nil, err
	}
	if len(f.sources) > 0 {
		cfg.Knowledge.Sources = f.sources
	}
	return cfg, nil
}

func openKnowledge(ctx context.Context, k config.Knowledge, progress io.Writer) (*store.Index, error) {
	return store.Open(ctx, k.Sources, k.CacheDir, func(format string, args ...any) {
		fmt.Fprintf(progress, format+"\n", args...)
	})
}

func knowledgeIndex(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("knowledge index", flag.ContinueOnError)
	var kf knowledgeFlags
	kf.register(fs)
	if _, err := llmcli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := kf.load()
	if err != nil {
		return err
	}
	start := time.Now()
	ix, err := openKnowledge(ctx, cfg.Knowledge, os.Stderr)
	if err != nil {
		return err
	}
	defer ix.Close()
	fmt.Fprintf(out, "%d passages in %s (%.1f s)\n", ix.Passages(), ix.Dir(), time.Since(start).Seconds())
	return nil
}

// queryResult is one line of `knowledge query --json`.
type queryResult struct {
	Question  string              `json:"question"`
	Passages  []knowledge.Passage `json:"passages"`
	Augmented string              `json:"augmented,omitempty"`
	Tokens    int                 `json:"tokens,omitempty"`
	Micros    int64               `json:"us"`
}

func knowledgeQuery(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("knowledge query", flag.ContinueOnError)
	var kf knowledgeFlags
	kf.register(fs)
	file := fs.String("file", "", "questions, one a line (- for stdin); prints wall and CPU p50/p99 at the end")
	asJSON := fs.Bool("json", false, "one JSON object a question")
	augment := fs.Bool("augment", false, "add the augmented user message (the template, trimmed with the model's tokenizer)")
	model := fs.String("model", "", "GGUF whose tokenizer counts tokens (default llm.engine.model)")
	repeat := fs.Int("repeat", 1, "look the questions up this many times (timing)")
	rest, err := llmcli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	cfg, err := kf.load()
	if err != nil {
		return err
	}
	questions := rest
	if *file != "" || len(questions) == 0 {
		r := in
		if *file != "" && *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if q := strings.TrimSpace(sc.Text()); q != "" {
				questions = append(questions, q)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(questions) == 0 {
		return fmt.Errorf("%w: no questions", errCommandLine)
	}
	ix, err := openKnowledge(ctx, cfg.Knowledge, os.Stderr)
	if err != nil {
		return err
	}
	defer ix.Close()
	k := cfg.Knowledge
	var count func(string) int
	if *augment {
		path := *model
		if path == "" {
			path = cfg.LLM.Engine.Model
		}
		tok, closeTok, err := loadTokenizer(path)
		if err != nil {
			return err
		}
		defer closeTok()
		count = func(s string) int { return len(tok.Encode(s, false, false)) }
	}
	// The augmented message comes from Wrap itself, around a model that
	// only records the request: exactly what the server would send.
	rec := &recordModel{}
	wrapped := knowledge.Wrap(rec, ix, knowledge.Options{TopK: k.TopK, MinScore: k.MinScore, MaxContextTokens: k.MaxContextTokens, CountTokens: count})

	runtime.LockOSThread() // per-thread CPU time below
	defer runtime.UnlockOSThread()
	var walls, cpus []time.Duration
	w := bufio.NewWriter(out)
	defer w.Flush()
	for rep := 0; rep < max(1, *repeat); rep++ {
		for _, q := range questions {
			cpu0 := threadCPU()
			t0 := time.Now()
			ps, err := ix.Search(ctx, q, k.TopK, k.MinScore)
			if err != nil {
				return err
			}
			ps = knowledge.Fit(ps, k.MaxContextTokens, count)
			wall := time.Since(t0)
			walls, cpus = append(walls, wall), append(cpus, threadCPU()-cpu0)
			if rep > 0 {
				continue
			}
			res := queryResult{Question: q, Passages: ps, Micros: wall.Microseconds()}
			if res.Passages == nil {
				res.Passages = []knowledge.Passage{}
			}
			if *augment {
				if _, err := wrapped.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: q}}}); err != nil {
					return err
				}
				res.Augmented = rec.last
				if len(ps) > 0 {
					res.Tokens = count(knowledge.Block(ps))
				}
			}
			if *asJSON {
				b, _ := json.Marshal(res)
				if _, err := w.Write(append(b, '\n')); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(w, "%s  (%d µs)\n", q, res.Micros)
			for _, p := range ps {
				fmt.Fprintf(w, "  %6.2f  [%s] %s: %s\n", p.Score, p.Kind, p.Title, p.Text)
			}
			if len(ps) == 0 {
				fmt.Fprintln(w, "  (nothing at min_score)")
			}
			if *augment && len(ps) > 0 {
				fmt.Fprintf(w, "  --- augmented (%d tokens of context):\n%s\n", res.Tokens, res.Augmented)
			}
		}
	}
	if *file != "" {
		fmt.Fprintf(os.Stderr, "%d lookups over %d passages: wall p50 %s p99 %s max %s; CPU p50 %s p99 %s\n",
			len(walls), ix.Passages(), pct(walls, 50), pct(walls, 99), pct(walls, 100), pct(cpus, 50), pct(cpus, 99))
	}
	return nil
}

func pct(ds []time.Duration, p int) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return fmt.Sprintf("%.3f ms", float64(s[i].Nanoseconds())/1e6)
}

// threadCPU is the calling OS thread's CPU time (user + system).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadTokenizer(path string) (*tokenizer.Tokenizer, func(), error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("tokenizer: %w", err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return tok, func() { f.Close() }, nil
}

// recordModel keeps the last user message it was asked to answer.
type recordModel struct{ last string }

func (m *recordModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	if n := len(req.Messages); n > 0 {
		m.last = req.Messages[n-1].Content
	}
	ch := make(chan llm.Token, 1)
	ch <- llm.Token{Done: true, Usage: &llm.Usage{}}
	close(ch)
	return ch, nil
}

// withKnowledge wraps the LLM in the knowledge stage when knowledge.enabled:
// the index opens (or is built) in the background with progress lines, and
// answers go without context until it is ready.
func withKnowledge(c *config.Config, m llm.Model, closers []io.Closer, log zerolog.Logger) (llm.Model, []io.Closer) {
	k := c.Knowledge
	if !k.Enabled {
		return m, closers
	}
	klog := log.With().Str("component", "knowledge").Logger()
	started := time.Now()
	base := store.Start(k.Sources, k.CacheDir, func(format string, args ...any) {
		klog.Info().Msgf(format, args...)
	}, func(ix *store.Index, err error) {
		if err != nil {
			klog.Warn().Err(err).Msg("knowledge base unavailable: answering without it")
			return
		}
		klog.Info().Uint64("passages", ix.Passages()).Str("index", ix.Dir()).Dur("after", time.Since(started)).Msg("knowledge base ready")
	})
	return knowledge.Wrap(m, base, knowledge.Options{
		TopK: k.TopK, MinScore: k.MinScore, MaxContextTokens: k.MaxContextTokens,
		CountTokens: tokenCounter(m),
		OnError:     func(err error) { klog.Warn().Err(err).Msg("lookup failed: answering without context") },
	}), append(closers, base)
}

// tokenCounter counts with the engine's own tokenizer; for other backends it
// estimates (about four characters a token of English).
func tokenCounter(m llm.Model) func(string) int {
	if e, ok := m.(*engine.Engine); ok {
		tok := e.Tokenizer()
		return func(s string) int { return len(tok.Encode(s, false, false)) }
	}
	return func(s string) int { return (len(s) + 3) / 4 }
}
