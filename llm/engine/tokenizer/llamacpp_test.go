package tokenizer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// TestLlamaCppRefusals rewrites a real vocabulary's tokenizer.ggml.pre or
// tokenizer.ggml.model to names llama.cpp knows but this package does not
// implement: each must be refused with its named error, not tokenized
// with the wrong rules.
func TestLlamaCppRefusals(t *testing.T) {
	src, err := gguf.Open(filepath.Join(llamacppDir, "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cases := []struct {
		key, value string
		want       error
	}{
		{"tokenizer.ggml.pre", "chameleon", ErrPre},
		{"tokenizer.ggml.pre", "tekken", ErrPre},
		{"tokenizer.ggml.pre", "chatglm-bpe", ErrPre},
		{"tokenizer.ggml.pre", "deepseek-v3", ErrPre},
		{"tokenizer.ggml.model", "t5", ErrModel},
		{"tokenizer.ggml.model", "rwkv", ErrModel},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			w := gguf.NewWriter()
			for _, k := range src.Keys() {
				if k != c.key {
					w.CopyValue(src, k)
				}
			}
			w.Set(c.key, c.value)
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			_, err = FromGGUF(f)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.value) {
				t.Fatalf("FromGGUF = %v, want %v naming %q", err, c.want, c.value)
			}
		})
	}
}

// llamacppDir holds llama.cpp's vocabulary-only GGUFs with their test
// inputs (.inp) and expected ids (.out); see its README.
const llamacppDir = "testdata/llamacpp"

// llamacppRefusals are the vocabularies this package does not implement,
// with the error FromGGUF must give for each (none today: every
// vocabulary here is claimed; TestLlamaCppRefusals covers the refusals).
var llamacppRefusals = map[string]error{}

// readVocabTests parses a .inp/.out pair the way llama.cpp's
// test-tokenizer-0 does: inputs separated by "\n__ggml_vocab_test__\n",
// one line of space-separated ids per input.
func readVocabTests(t *testing.T, inpPath, outPath string) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(inpPath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	raw := string(inp)
	for pos := 0; pos < len(raw); {
		next := strings.Index(raw[pos:], sep)
		if next < 0 {
			inputs = append(inputs, raw[pos:])
			break
		}
		inputs = append(inputs, raw[pos:pos+next])
		pos += next + len(sep)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs but %d expected lines", inpPath, len(inputs), len(lines))
	}
	for _, line := range lines {
		var ids []int32
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s: %v", outPath, err)
			}
			ids = append(ids, int32(v))
		}
		want = append(want, ids)
	}
	return inputs, want
}

// TestLlamaCppVocabs runs every llama.cpp reference vocabulary: a claimed
// one must give llama.cpp's ids on every input, an unclaimed one must be
// refused with its named error.
func TestLlamaCppVocabs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(llamacppDir, "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no vocabularies under %s", llamacppDir)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := FromGGUF(f)
			if wantErr, refused := llamacppRefusals[name]; refused {
				if !errors.Is(err, wantErr) {
					t.Fatalf("FromGGUF = %v, want %v", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + ".inp"); err != nil {
				t.Skipf("no test inputs shipped for %s (absent upstream)", name)
			}
			inputs, want := readVocabTests(t, path+".inp", path+".out")
			bad := 0
			for i, in := range inputs {
				got := tok.Encode(in, false, false)
				if !equalIDs(got, want[i]) {
					bad++
					t.Errorf("%q:\n got %v\nwant %v", in, got, want[i])
				}
			}
			if bad > 0 {
				t.Logf("%d of %d inputs differ", bad, len(inputs))
			}
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
