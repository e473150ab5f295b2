// Command tooleval scores the in-process model's tool calls on spoken
// requests and ordinary questions (internal/tooleval).
//
//	go run ./cmd/tooleval --file internal/tooleval/testdata/tools-heldout.jsonl
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/voxpipe/voxpipe/internal/tooleval"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := tooleval.Main(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tooleval:", err)
		os.Exit(1)
	}
}
