package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoVoiceStack keeps voxllm free of the voice stack's packages (and so of their C libraries),
// which is what lets a static build run where those libraries are missing.
func TestNoVoiceStack(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("requires the go command on PATH (go list -deps lists voxllm's imports): %v", err)
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/voxpipe/voxpipe/"
	var engine bool
	for _, p := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		engine = engine || rest == "llm/engine"
		for _, banned := range []string{"asr", "tts", "pipeline", "web", "cgo/sphinx", "cgo/flite", "cgo/espeak", "cgo/g722dec", "cgo/malloc"} {
			if rest == banned || strings.HasPrefix(rest, banned+"/") {
				t.Errorf("voxllm imports %s", p)
			}
		}
	}
	if !engine {
		t.Errorf("voxllm does not import llm/engine: %s", out)
	}
}
