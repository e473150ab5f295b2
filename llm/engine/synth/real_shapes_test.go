package synth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/tokenizer"
)

// TestRealShapeSmolLM2 writes the full SmolLM2-135M shape in Q8_0 (137 MiB, a few seconds) and
// compares its size with llama.cpp's anchor file of the same shape (137.6 MiB).
func TestRealShapeSmolLM2(t *testing.T) {
	if testing.Short() {
		t.Skip("requires writing a 137 MiB model; skipped with -short")
	}
	path := filepath.Join(t.TempDir(), "smollm2.gguf")
	start := time.Now()
	if err := Write(path, "smollm2-135m", gguf.TypeQ8_0, 1); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mib := float64(st.Size()) / (1 << 20)
	t.Logf("smollm2-135m Q8_0: %.1f MiB in %v (llama.cpp anchor file: 137.6 MiB)", mib, time.Since(start).Round(time.Millisecond))
	if mib < 136 || mib > 139.5 {
		t.Errorf("file is %.1f MiB, the anchor is 137.6 MiB", mib)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 49152 {
		t.Fatalf("vocab %d", tok.VocabSize())
	}
}

// TestRealShapesAll writes every full-size shape and type when VOXPIPE_SYNTH_ALL names a directory
// (minutes of CPU, ~4 GB of disk), logging sizes against the llama.cpp anchor files.
func TestRealShapesAll(t *testing.T) {
	dir := os.Getenv("VOXPIPE_SYNTH_ALL")
	if dir == "" {
		t.Skip("requires VOXPIPE_SYNTH_ALL=<dir> (writes every full-size model)")
	}
	for _, shape := range []string{"smollm2-135m", "qwen2.5-0.5b", "llama-1b"} {
		for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeF16} {
			path := filepath.Join(dir, shape+"-"+typ.String()+".gguf")
			start := time.Now()
			if err := Write(path, shape, typ, 1); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %.1f MiB in %v", shape, typ, float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
			_ = os.Remove(path)
		}
	}
}
