package llmcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/internal/testenv"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nonsense"}, {"bench"}, {"bench", "--model", "m.gguf", "extra"}, {"synth", "--type", "q5_k", "--shape", "llama-1b", "out"}} {
		var out bytes.Buffer
		err := Run(t.Context(), args, nil, &out)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("Run(%q) = %v, want an ErrUsage", args, err)
		}
	}
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"help"}, nil, &out); err != nil || !strings.Contains(out.String(), "bench     --model M") {
		t.Errorf("help: %v, wrote %q", err, out.String())
	}
}

// TestBenchJSON runs `llm bench --json` on the demo model, as cmd/voxllm does on the device
// machine, and checks the fields the llama.cpp comparison reads.
func TestBenchJSON(t *testing.T) {
	model := filepath.Join(testenv.RepoRoot(t), "models", "voxpipe-demo-q8_0.gguf")
	var out bytes.Buffer
	args := []string{"bench", "--model", model, "--threads", "1", "--prompt-tokens", "16", "--decode-tokens", "4", "--json"}
	if err := Run(t.Context(), args, nil, &out); err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %q", err, out.String())
	}
	if rep.Model != model || rep.Threads != 1 || rep.PromptTokens != 16 || rep.DecodeTokens != 4 || rep.Kernels == "" || rep.GOMAXPROCS != runtime.GOMAXPROCS(0) {
		t.Fatalf("report %+v", rep)
	}
	if rep.PromptTokensPerS <= 0 || rep.DecodeTokensPerS <= 0 || rep.DecodeBytes <= 0 || rep.BandwidthGBs <= 0 {
		t.Fatalf("speeds and probe not all positive: %+v", rep)
	}
	if want := rep.DecodeGBs / rep.BandwidthGBs; math.Abs(rep.DecodeFraction-want) > 1e-9*want {
		t.Fatalf("decode_fraction %v, want decode_gb_s / bandwidth_gb_s = %v", rep.DecodeFraction, want)
	}
	if want := rep.DecodeTokensPerS * float64(rep.DecodeBytes) / 1e9; math.Abs(rep.DecodeGBs-want) > 1e-9*want {
		t.Fatalf("decode_gb_s %v, want tokens/s × decode_bytes = %v", rep.DecodeGBs, want)
	}
}
