// Command voxllm is `voxpipe llm` without the voice stack: the same run, bench, quantize, eval and
// synth commands (internal/llmcli), in a binary that links only the engine and its kernels, not
// pocketsphinx, flite or opus. A static build runs on a machine that has none of voxpipe's audio
// libraries, which is how the engine is measured against llama.cpp on the device machine:
//
//	go build -ldflags=-extldflags=-static -o voxllm ./cmd/voxllm
//	voxllm synth --shape qwen2.5-0.5b --type q4_0 /tmp/q.gguf
//	taskset -c 2,3 voxllm bench --model /tmp/q.gguf --threads 2 --prompt-tokens 128 --decode-tokens 32 --json
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/voxpipe/voxpipe/internal/llmcli"
	"github.com/voxpipe/voxpipe/internal/procs"
)

func main() {
	// The first SIGINT/SIGTERM cancels ctx; once it has fired, a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	procs.SpareForCgo() // the engine's kernels run in C
	err := llmcli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "voxllm:", err)
		if errors.Is(err, llmcli.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
