// Command voxpipe is the voice assistant server and its tools; `voxpipe
// help` lists the subcommands. The benches and evaluations live in
// internal/bench, the engine's tools in internal/llmcli: this package is the
// server and a thin dispatch.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/voxpipe/voxpipe/internal/bench"
	"github.com/voxpipe/voxpipe/internal/llmcli"
	"github.com/voxpipe/voxpipe/internal/procs"
	"github.com/voxpipe/voxpipe/internal/tooleval"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: voxpipe <command> [flags]

commands:
  serve             run the voice server (browser page, /ws, WebRTC, xiaozhi,
                    OpenAI API /v1/, /metrics, /healthz)
  agent             serve the pipeline as a LiveKit agent worker (rooms of a
                    LiveKit server; docs/scaling.md)
  llm run           generate from a GGUF model (prompt or chat)
  llm bench         prompt and decode speed of a GGUF model
  llm quantize      convert a GGUF model to q8_0, q4_0, f16 or f32
  llm eval          perplexity (and draft agreement) on held-out text
  llm synth         write a random-weight GGUF of a known shape
  knowledge index   build or check the knowledge base's cached index
  knowledge query   look questions up in the knowledge base
  eval answers      keyword hits of the model's answers to question sets
  eval tools        the model's tool calls on spoken requests (right tool,
                    right arguments) and on ordinary questions (none)
` + bench.Usage + `  version           print the version
  help              print this list

Run "voxpipe <command> -h" for a command's flags.
`

// errCommandLine marks a mistake on the command line (exit status 2).
var errCommandLine = errors.New("usage")

func main() {
	// The first SIGINT/SIGTERM cancels ctx for a graceful stop; once it has
	// fired, signal handling is reset so a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	procs.SpareForCgo() // the engine, recogniser and synthesiser run in C
	err := run(ctx, os.Args[1:])
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errCommandLine), errors.Is(err, bench.ErrUsage), errors.Is(err, tooleval.ErrUsage):
		fmt.Fprintln(os.Stderr, "voxpipe:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "voxpipe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("%w: no command given", errCommandLine)
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:])
	case "agent":
		return runAgent(ctx, args[1:])
	case "eval":
		return runEval(ctx, args[1:], os.Stdout)
	case "knowledge":
		return runKnowledge(ctx, args[1:])
	case "llm":
		return llmcli.Run(ctx, args[1:], os.Stdin, os.Stdout)
	case "bench":
		return runBench(ctx, args[1:], os.Stdout)
	case "version", "--version", "-version":
		fmt.Println(versionString())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errCommandLine, args[0])
}

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("voxpipe %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
