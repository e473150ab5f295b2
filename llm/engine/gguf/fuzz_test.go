package gguf

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics or over-allocates, and that any
// file it accepts survives a copy through the Writer.
func FuzzParse(f *testing.F) {
	var buf bytes.Buffer
	if _, err := sampleWriter().WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:100])
	f.Add(header(3, 0, 0))
	f.Add(crafted2p62())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, k := range file.Keys() {
			if _, ok := file.Value(k); !ok {
				t.Fatalf("key %q listed but missing", k)
			}
		}
		w := NewWriter()
		for _, k := range file.Keys() {
			w.CopyValue(file, k)
		}
		for _, ti := range file.Tensors {
			_, d, ok := file.Tensor(ti.Name)
			if !ok || uint64(len(d)) != ti.Bytes() {
				t.Fatalf("tensor %q data", ti.Name)
			}
			w.AddTensor(ti.Name, ti.Type, ti.Dims, d)
		}
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			// The Writer only accepts uint32 alignment; a parsed file may use another integer type.
			return
		}
		again, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("re-parse of a written copy: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) || len(again.Keys()) != len(file.Keys()) {
			t.Fatal("copy lost entries")
		}
	})
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzParse seeds")

// TestFuzzSeeds writes the committed seed corpus when run with -update-seeds:
// small valid files from the Writer and truncations of them.
func TestFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("seed corpus rewrite requires -update-seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{}
	var full bytes.Buffer
	if _, err := sampleWriter().WriteTo(&full); err != nil {
		t.Fatal(err)
	}
	seeds["valid_v3"] = full.Bytes()
	v2 := bytes.Clone(full.Bytes())
	v2[4] = 2
	seeds["valid_v2"] = v2
	w := sampleWriter()
	w.Set("general.alignment", uint32(64))
	var aligned bytes.Buffer
	if _, err := w.WriteTo(&aligned); err != nil {
		t.Fatal(err)
	}
	seeds["valid_align64"] = aligned.Bytes()
	small := NewWriter()
	small.Set("tokenizer.ggml.tokens", []string{"a", "b"})
	small.AddTensor("t", TypeQ4_0, []uint64{32}, make([]byte, 18))
	var sm bytes.Buffer
	if _, err := small.WriteTo(&sm); err != nil {
		t.Fatal(err)
	}
	seeds["valid_small"] = sm.Bytes()
	seeds["overflow_2p62"] = crafted2p62() // issue 14 item 5
	for _, cut := range []int{3, 10, 24, 60, 200, 400, full.Len() - 1} {
		seeds[fmt.Sprintf("truncated_%d", cut)] = full.Bytes()[:cut]
	}
	for name, data := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
