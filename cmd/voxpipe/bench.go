package main

import (
	"context"
	"fmt"
	"io"
	"os"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/bench"
	"github.com/voxpipe/voxpipe/internal/tooleval"
)

// benchWiring hands internal/bench the server's own config loading and
// backends, so `voxpipe bench` and `voxpipe eval` measure what serve runs.
func benchWiring() *bench.Wiring {
	return &bench.Wiring{
		DefaultConfig:  defaultConfigPath,
		LoadConfig:     loadConfig,
		ASRBackends:    asrBackends,
		OpenBackends:   openBackends,
		CloseAll:       closeAll,
		Pipeline:       pipelineConfig,
		RTC:            rtcConfig,
		SessionCaches:  sessionCaches,
		Speakers:       speakerMemory,
		ObserveRescore: func(f func(asrsphinx.Rescored)) { sphinxRescoreObserver = f },
		NewEngine:      newEngine,
		OpenKnowledge:  openKnowledge,
		TokenCounter:   tokenCounter,
	}
}

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	return benchWiring().Run(ctx, args, stdout)
}

const evalUsage = `usage: voxpipe eval answers|tools [flags]

  answers   keyword hits of the model's answers to question sets
  tools     the in-process model's tool calls on spoken requests and
            ordinary questions (docs/tools.md)

Run "voxpipe eval answers -h" or "voxpipe eval tools -h" for the flags.
`

func runEval(ctx context.Context, args []string, stdout io.Writer) error {
	switch {
	case len(args) > 0 && args[0] == "tools":
		return tooleval.Main(ctx, args[1:], stdout)
	case len(args) > 0 && args[0] == "answers":
		return benchWiring().Eval(ctx, args, stdout)
	}
	fmt.Fprint(os.Stderr, evalUsage)
	return fmt.Errorf("%w: eval: the evaluations are \"answers\" and \"tools\"", errCommandLine)
}
