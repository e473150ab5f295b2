package main

import (
	"context"
	"io"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/bench"
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

func runEval(ctx context.Context, args []string, stdout io.Writer) error {
	return benchWiring().Eval(ctx, args, stdout)
}
