package synth

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/tokenizer"
)

func TestTinyAllTypes(t *testing.T) {
	dir := t.TempDir()
	for _, shape := range []string{"tiny", "tiny-qwen2", "tiny-gemma3", "tiny-smollm3"} {
		s, _ := Lookup(shape)
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0} {
			path := filepath.Join(dir, shape+"-"+typ.String()+".gguf")
			if err := Write(path, shape, typ, 42); err != nil {
				t.Fatalf("%s %s: %v", shape, typ, err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			checkMetadata(t, f, s)
			checkTensors(t, f, s, typ)
			checkTokenizer(t, f, s)
			f.Close()
		}
	}
}

func checkMetadata(t *testing.T, f *gguf.File, s Shape) {
	t.Helper()
	a := s.Arch + "."
	for key, want := range map[string]uint64{
		a + "embedding_length": uint64(s.Embd), a + "block_count": uint64(s.Layers),
		a + "attention.head_count": uint64(s.Heads), a + "attention.head_count_kv": uint64(s.KVHeads),
		a + "feed_forward_length": uint64(s.FF), a + "context_length": uint64(s.Context),
	} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s: %s = %d (present %v), want %d", s.Name, key, got, ok, want)
		}
	}
	if got, _ := f.Float(a + "rope.freq_base"); float32(got) != s.RopeBase {
		t.Errorf("%s: rope.freq_base %v", s.Name, got)
	}
	if got, _ := f.Float(a + "attention.layer_norm_rms_epsilon"); float32(got) != s.RMSEps {
		t.Errorf("%s: rms eps %v", s.Name, got)
	}
	if s.KeyLength > 0 {
		if got, _ := f.Uint(a + "attention.key_length"); got != uint64(s.KeyLength) {
			t.Errorf("%s: key_length %d", s.Name, got)
		}
	}
	if s.SlidingWindow > 0 {
		if got, _ := f.Uint(a + "attention.sliding_window"); got != uint64(s.SlidingWindow) {
			t.Errorf("%s: sliding_window %d", s.Name, got)
		}
	}
	if arch, _ := f.String("general.architecture"); arch != s.Arch {
		t.Errorf("architecture %q", arch)
	}
	if pre, _ := f.String("tokenizer.ggml.pre"); pre != s.Pre {
		t.Errorf("pre %q", pre)
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); tmpl != ChatTemplate {
		t.Errorf("chat template %q", tmpl)
	}
}

func checkTensors(t *testing.T, f *gguf.File, s Shape, typ gguf.Type) {
	t.Helper()
	if _, _, ok := f.Tensor("output.weight"); ok {
		t.Errorf("%s: output.weight present, embeddings should be tied", s.Name)
	}
	specs := s.tensors()
	if len(f.Tensors) != len(specs) {
		t.Fatalf("%s: %d tensors, want %d", s.Name, len(f.Tensors), len(specs))
	}
	for _, ts := range specs {
		ti, data, ok := f.Tensor(ts.name)
		if !ok {
			t.Fatalf("%s: tensor %s missing", s.Name, ts.name)
		}
		if ti.Dims[0] != uint64(ts.cols) || (ts.rows > 1 && ti.Dims[1] != uint64(ts.rows)) {
			t.Fatalf("%s: %s dims %v, want [%d %d]", s.Name, ts.name, ti.Dims, ts.cols, ts.rows)
		}
		want := typ
		switch {
		case ts.rows == 1:
			want = gguf.TypeF32
		case typ == gguf.TypeQ4_0 && ts.name == "token_embd.weight":
			want = gguf.TypeQ8_0
		}
		if ti.Type != want {
			t.Fatalf("%s %s: %s stored as %s, want %s", s.Name, typ, ts.name, ti.Type, want)
		}
		x := make([]float32, ti.Elements())
		switch ti.Type {
		case gguf.TypeQ8_0:
			kernels.DequantizeQ8_0(x, data)
		case gguf.TypeQ4_0:
			kernels.DequantizeQ4_0(x, data)
		case gguf.TypeF16:
			kernels.DequantizeF16(x, data)
		default:
			for i := range x {
				x[i] = math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24)
			}
		}
		var sum, sq float64
		for _, v := range x {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		n := float64(len(x))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		if ts.ones && ts.jitter != 0 {
			// 1 + jitter·N(0, 1), over ≥ 32 samples.
			if math.Abs(mean-1) > ts.jitter || math.Abs(std-ts.jitter) > ts.jitter/2 {
				t.Fatalf("%s: norm %s mean %v std %v, want ≈ 1 ± %v", s.Name, ts.name, mean, std, ts.jitter)
			}
			continue
		}
		if ts.ones {
			if mean != 1 || std > 1e-6 {
				t.Fatalf("%s: norm %s mean %v std %v, want all 1", s.Name, ts.name, mean, std)
			}
			continue
		}
		// N(0, 0.02): with ≥ 64 samples the sample std is well within 0.02 ± 40 %, Q4_0 adds
		// about amax/8/√3 ≈ 0.004 of rounding noise.
		if math.Abs(std-0.02) > 0.008 || math.Abs(mean) > 0.01 {
			t.Fatalf("%s %s: %s mean %v std %v, want ≈ N(0, 0.02)", s.Name, typ, ts.name, mean, std)
		}
	}
}

func checkTokenizer(t *testing.T, f *gguf.File, s Shape) {
	t.Helper()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatalf("%s: tokenizer: %v", s.Name, err)
	}
	if tok.VocabSize() != s.Vocab {
		t.Fatalf("vocab %d, want %d", tok.VocabSize(), s.Vocab)
	}
	text := "<|im_start|>user\nHello, world! how are you?<|im_end|>\n"
	ids := tok.Encode(text, false, true)
	if len(ids) == 0 || ids[0] != int32(s.Vocab-2) {
		t.Fatalf("%s: Encode(%q) = %v, want <|im_start|> (%d) first", s.Name, text, ids, s.Vocab-2)
	}
	// Decode leaves control tokens out (llama.cpp's default rendering)
	if got, want := tok.Decode(ids), "user\nHello, world! how are you?\n"; got != want {
		t.Fatalf("%s: round trip %q → %v → %q, want %q", s.Name, text, ids, got, want)
	}

	if !tok.IsEOG(int32(s.Vocab - 1)) {
		t.Errorf("%s: <|im_end|> is not end-of-generation", s.Name)
	}
	// merged tokens must actually be used: "how are you" should not be all single bytes
	plain := tok.Encode("how are you", false, false)
	if len(plain) >= len("how are you") {
		t.Errorf("%s: %q encoded to %d tokens: merges not applied", s.Name, "how are you", len(plain))
	}
}

func TestVocabularyConsistent(t *testing.T) {
	tokens, types, merges, err := Vocabulary(151936)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 151936 || len(types) != len(tokens) {
		t.Fatalf("%d tokens, %d types", len(tokens), len(types))
	}
	seen := make(map[string]bool, len(tokens))
	for _, tk := range tokens {
		if seen[tk] {
			t.Fatalf("duplicate token %q", tk)
		}
		seen[tk] = true
	}
	for i, m := range merges {
		var l, r string
		for j := len(m) - 1; j >= 0; j-- {
			if m[j] == ' ' {
				l, r = m[:j], m[j+1:]
				break
			}
		}
		if !seen[l] || !seen[r] || !seen[l+r] {
			t.Fatalf("merge %d %q: parts or result missing from the vocabulary", i, m)
		}
	}
	if _, _, _, err := Vocabulary(100); err == nil {
		t.Fatal("vocabulary of 100 accepted")
	}
}

func TestUnknownShape(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "x.gguf"), "gpt-9", gguf.TypeQ8_0, 1); err == nil {
		t.Fatal("unknown shape accepted")
	}
	if err := Write(filepath.Join(t.TempDir(), "x.gguf"), "tiny", gguf.TypeQ4_1, 1); err == nil {
		t.Fatal("Q4_1 accepted")
	}
}

func TestParamCounts(t *testing.T) {
	// llama.cpp's reported sizes for the anchors: 134.5 M and 494 M parameters.
	// Gemma 3: the published 268 M (270m) and 1000 M (1b).
	for name, want := range map[string]float64{"smollm2-135m": 134.5e6, "qwen2.5-0.5b": 494.0e6, "llama-1b": 1235.8e6,
		"gemma3-270m": 268.1e6, "gemma3-1b": 999.9e6} {
		s, _ := Lookup(name)
		if got := float64(s.Params()); math.Abs(got-want)/want > 0.005 {
			t.Errorf("%s: %d parameters, want ≈ %.1f M", name, s.Params(), want/1e6)
		}
	}
}
