// Command voxpipe is the voice assistant server and its tools.
//
//	voxpipe serve [--config F] [--addr HOST:PORT] [--set key=value ...]
//	voxpipe llm run|bench|quantize|synth ...
//	voxpipe bench turns|eou|asr|asr-sets ...
//	voxpipe version
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/voxpipe/voxpipe/internal/llmcli"
	"github.com/voxpipe/voxpipe/internal/procs"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: voxpipe <command> [flags]

commands:
  serve     run the voice server (WebSocket /ws, /metrics, /healthz, OpenAI API /v1/)
  llm       the in-process LLM engine's tools (run, bench, quantize, synth)
  bench     benchmarks: bench turns (end of turn, heard latency), bench eou
            (the end-of-utterance scorer on text), bench eou-speech (the
            recogniser's text of spoken utterances at pauses and ends, for
            the scorer), bench asr (WER and final latency on WAV sets),
            bench asr-sets
  knowledge the local knowledge base (index, query)
  eval      score answers: eval answers --file Q.jsonl [--knowledge on|off|both]
  version   print the version

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
	case errors.Is(err, errCommandLine):
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
	case "eval":
		return runEval(ctx, args[1:])
	case "knowledge":
		return runKnowledge(ctx, args[1:])
	case "llm":
		return llmcli.Run(ctx, args[1:], os.Stdin, os.Stdout)
	case "bench":
		if len(args) > 1 && strings.HasPrefix(args[1], "asr") {
			return runBenchASRCommand(ctx, args[1:])
		}
		if len(args) > 1 && args[1] == "eou" {
			return runBenchEOU(ctx, args[2:], os.Stdout)
		}
		if len(args) > 1 && args[1] == "eou-speech" {
			return runBenchEOUSpeech(ctx, args[2:], os.Stdout)
		}
		return runBench(ctx, args[1:])
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
