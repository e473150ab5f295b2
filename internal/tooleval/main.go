package tooleval

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/llm/knowledge"
	"github.com/voxpipe/voxpipe/llm/knowledge/store"
)

// DefaultSystem is configs/default.yaml's system prompt, which the demo model was trained with.
const DefaultSystem = "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."

// ErrUsage is returned for bad command-line arguments.
var ErrUsage = errors.New("tooleval: usage")

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

// Main runs the evaluation as a command: `tooleval --file CASES.jsonl ...`
// (cmd/tooleval; `voxpipe eval tools` once wired). The in-process engine
// answers greedily with the knowledge stage on, as `make run` does.
func Main(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval tools", flag.ContinueOnError)
	fs.SetOutput(out)
	model := fs.String("model", "models/voxpipe-demo-q8_0.gguf", "GGUF model")
	var fl files
	fs.Var(&fl, "file", "case file, JSON lines {text, device, want, args, seconds} (repeatable)")
	threads := fs.Int("threads", 2, "engine threads")
	know := fs.Bool("knowledge", true, "put the knowledge base's passages before each request, as the server does")
	sources := fs.String("knowledge-sources", "dictionary", "knowledge sources, comma-separated")
	system := fs.String("system", DefaultSystem, "system prompt")
	round := fs.Bool("round", false, "after a right call, send a result and print the spoken answer")
	lookup := fs.Bool("lookup", true, "prompt-lookup speculative decoding, as configs/default.yaml (greedy answers are the same)")
	penalty := fs.Float64("repeat-penalty", 1.1, "repetition penalty, as configs/default.yaml")
	verbose := fs.Bool("v", false, "print every case")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if len(fl) == 0 {
		return fmt.Errorf("%w: give at least one --file", ErrUsage)
	}
	var cases []Case
	for _, f := range fl {
		cs, err := ReadCases(f)
		if err != nil {
			return err
		}
		cases = append(cases, cs...)
	}
	e, err := engine.Open(engine.Config{ModelPath: *model, Threads: *threads, RepeatPenalty: float32(*penalty), PromptLookup: *lookup})
	if err != nil {
		return err
	}
	defer e.Close()
	var m llm.Model = e
	if *know {
		ix, err := store.Open(ctx, strings.Split(*sources, ","), "", func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		})
		if err != nil {
			return err
		}
		defer ix.Close()
		tok := e.Tokenizer()
		m = knowledge.Wrap(e, ix, knowledge.Options{TopK: 2, MinScore: 7, MaxContextTokens: 120,
			CountTokens: func(s string) int { return len(tok.Encode(s, false, false)) }})
	}
	var progress io.Writer
	if *verbose {
		progress = out
	}
	start := time.Now()
	byFile := map[string][]Result{}
	rs, err := Run(ctx, m, cases, Options{System: *system, Round: *round}, progress)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if !*verbose && !r.Right {
			fmt.Fprintf(out, "MISS %-8s %q -> %s\n", r.Case.Device, r.Case.Text, describe(r))
		}
		byFile[r.Case.file] = append(byFile[r.Case.file], r)
	}
	for _, f := range fl {
		fmt.Fprintf(out, "== %s\n", f)
		Summarise(byFile[f]).Write(out)
	}
	if len(fl) > 1 {
		fmt.Fprintln(out, "== all")
		Summarise(rs).Write(out)
	}
	fmt.Fprintf(out, "%d cases in %.1f s (%s, knowledge %v)\n", len(rs), time.Since(start).Seconds(), *model, *know)
	return nil
}
