// Package bench holds voxpipe's measuring commands: bench turns (end of turn
// and heard latency against a silence-only baseline), bench eou (the
// end-of-utterance scorer on labelled text), bench eou-speech (the
// recogniser's text of spoken utterances, for the scorer's training), bench
// asr and asr-sets (WER and final latency on WAV sets) and eval answers
// (keyword hits of the model's answers).
//
// The benches measure what `voxpipe serve` runs, so they take the server's
// own config loading and backend construction as a Wiring rather than
// rebuilding it: cmd/voxpipe fills one in and dispatches to Run and Eval.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/knowledge/store"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
)

// ErrUsage marks a mistake on a bench's command line (the command exits 2).
var ErrUsage = errors.New("usage")

// errCommandLine is ErrUsage under the name the command's code uses.
var errCommandLine = ErrUsage

// Wiring is what the benches borrow from the server command. Every field
// must be set.
type Wiring struct {
	DefaultConfig string                                                             // the config path flags default to
	LoadConfig    func(path, addr string, sets []string) (*config.Config, error)     // defaults → file → --set → Validate
	ASRBackends   map[string]func(*config.Config) (asr.Recognizer, io.Closer, error) // by asr.backend
	OpenBackends  func(*config.Config, zerolog.Logger) (pipeline.Backends, []io.Closer, error)
	CloseAll      func([]io.Closer) error
	Pipeline      func(*config.Config) pipeline.Config
	RTC           func(config.RTC) web.RTCConfig
	SessionCaches func(*config.Config) int
	Speakers      func(*config.Config) *pipeline.SpeakerMemory
	// ObserveRescore sets the observer of asr/sphinx rescoring for the
	// recognisers built after it (nil clears it).
	ObserveRescore func(func(asrsphinx.Rescored))
	NewEngine      func(*config.Config) (llm.Model, io.Closer, error)
	OpenKnowledge  func(context.Context, config.Knowledge, io.Writer) (*store.Index, error)
	TokenCounter   func(llm.Model) func(string) int
}

// Usage is the one-line purpose of every bench, for `voxpipe help`.
const Usage = `  bench turns       end of turn and heard latency: synthetic and real speech
                    against a silence-only baseline server
  bench eou         the end-of-utterance scorer on labelled text (AUC, policies)
  bench eou-speech  the recogniser's text of spoken utterances at pauses and
                    ends (training rows for the scorer)
  bench asr         WER and final latency of the configured recogniser on WAV sets
  bench asr-sets    write the real-speech WAV sets from Debian packages
  bench rooms       real recordings in noise (pink, brown, babble, music, tv)
                    at 0-20 dB SNR: VAD starts and ends, turns started by
                    noise alone, and (--live) WER and heard latency, for the
                    energy and silero speech detectors
`

// Run runs `voxpipe bench <name> [flags]`; args start at the name.
func (w *Wiring) Run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, "usage: voxpipe bench <name> [flags]\n\n"+Usage)
		return fmt.Errorf("%w: bench: which bench?", ErrUsage)
	}
	switch args[0] {
	case "turns":
		return w.runBench(ctx, args, stdout)
	case "eou":
		return w.runBenchEOU(ctx, args[1:], stdout)
	case "eou-speech":
		return w.runBenchEOUSpeech(ctx, args[1:], stdout)
	case "asr":
		return w.runBenchASR(ctx, args[1:], stdout)
	case "asr-sets":
		return runBenchASRSets(args[1:], stdout)
	case "rooms":
		return w.runBenchRooms(ctx, args[1:], stdout)
	}
	fmt.Fprint(os.Stderr, "usage: voxpipe bench <name> [flags]\n\n"+Usage)
	return fmt.Errorf("%w: bench: unknown %q", ErrUsage, args[0])
}

// Eval runs `voxpipe eval answers [flags]`; args start at "answers".
func (w *Wiring) Eval(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "answers" {
		fmt.Fprint(os.Stderr, evalUsage)
		return fmt.Errorf("%w: eval: the only evaluation is \"answers\"", ErrUsage)
	}
	return w.evalAnswers(ctx, args[1:], stdout)
}
