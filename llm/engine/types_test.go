package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// f16Fields are the byte offsets of each block type's fp16 scale fields (d, and dmin or m).
var f16Fields = map[gguf.Type][]int{
	gguf.TypeQ4_0: {0}, gguf.TypeQ8_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2},
	gguf.TypeIQ4_NL: {0}, gguf.TypeIQ4_XS: {0}, gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108},
	gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208},
}

// randomTensor returns n elements of typ as random codes whose scales are set so the values'
// RMS is about rms (every value is linear in the scale fields when they are all equal).
func randomTensor(rng *rand.Rand, typ gguf.Type, n int, rms float64) []byte {
	if typ.BlockSize() == 1 {
		out := make([]byte, n*typ.BlockBytes())
		for i := 0; i < n; i++ {
			v := float32(rng.NormFloat64() * rms)
			switch typ {
			case gguf.TypeF32:
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
			case gguf.TypeF16:
				binary.LittleEndian.PutUint16(out[2*i:], kernels.F32ToF16(v))
			case gguf.TypeBF16:
				binary.LittleEndian.PutUint16(out[2*i:], uint16(math.Float32bits(v)>>16))
			}
		}
		return out
	}
	bb := typ.BlockBytes()
	out := make([]byte, n/typ.BlockSize()*bb)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	set := func(s float32) {
		for b := 0; b < len(out); b += bb {
			for _, off := range f16Fields[typ] {
				binary.LittleEndian.PutUint16(out[b+off:], kernels.F32ToF16(s))
			}
		}
	}
	set(1)
	vals := make([]float32, n)
	if err := quant.Dequantize(vals, out, typ); err != nil {
		panic(err)
	}
	var ss float64
	for _, v := range vals {
		ss += float64(v) * float64(v)
	}
	set(float32(rms / math.Sqrt(ss/float64(n))))
	return out
}

// mixedModel writes a llama model whose matrices cycle through types (as Q4_K_M files mix
// Q4_K, Q6_K, Q5_0 and Q8_0), and the same model with every tensor decoded to F32.
func mixedModel(t *testing.T, types []gguf.Type) (mixed, f32 string) {
	t.Helper()
	base := writeTiny(t, tinySpec{arch: "llama", typ: gguf.TypeF32, dim: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 512, ctx: 256, seed: 3})
	f, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wm, wf := gguf.NewWriter(), gguf.NewWriter()
	for _, k := range f.Keys() {
		wm.CopyValue(f, k)
		wf.CopyValue(f, k)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	next := 0
	for _, ti := range f.Tensors {
		_, data, _ := f.Tensor(ti.Name)
		typ, raw := gguf.TypeF32, data
		if len(ti.Dims) == 2 {
			typ = types[next%len(types)]
			next++
			raw = randomTensor(rng, typ, int(ti.Elements()), 0.05)
		} else if strings.HasPrefix(ti.Name, "blk.1.") {
			typ = gguf.TypeBF16 // a vector in BF16 converts to F32 too
			raw = make([]byte, 2*ti.Elements())
			for i := range ti.Elements() {
				binary.LittleEndian.PutUint16(raw[2*i:], uint16(binary.LittleEndian.Uint32(data[4*i:])>>16))
			}
		}
		wm.AddTensor(ti.Name, typ, ti.Dims, raw)
		vals := make([]float32, ti.Elements())
		if err := quant.Dequantize(vals, raw, typ); err != nil {
			t.Fatal(err)
		}
		fb := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(fb[4*i:], math.Float32bits(v))
		}
		wf.AddTensor(ti.Name, gguf.TypeF32, ti.Dims, fb)
	}
	dir := t.TempDir()
	mixed, f32 = filepath.Join(dir, "mixed.gguf"), filepath.Join(dir, "f32.gguf")
	if err := wm.WriteFile(mixed); err != nil {
		t.Fatal(err)
	}
	if err := wf.WriteFile(f32); err != nil {
		t.Fatal(err)
	}
	return mixed, f32
}

// TestMixedTypesRun: a model whose matrices are every loadable quantized type runs, and its
// logits follow the same model decoded to F32 (the converted weights and Q8_0 activations
// round; the gate is a measured max |Δ| with a margin).
func TestMixedTypesRun(t *testing.T) {
	types := []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ5_0, gguf.TypeQ8_0, gguf.TypeQ5_K, gguf.TypeQ4_1,
		gguf.TypeQ5_1, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeF16}
	mixed, f32 := mixedModel(t, types)
	logits := func(path string) ([]float32, *model) {
		_, m := testModel(t, path)
		rt := newCompute(m, 2, 256, defaultBatch)
		defer rt.close()
		prompt := []int32{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54}
		all := make([]float32, len(prompt)*m.hp.vocab)
		if err := rt.forward(context.Background(), newKVCache(&m.hp, 256), prompt, 0, all); err != nil {
			t.Fatal(err)
		}
		return all, m
	}
	got, m := logits(mixed)
	want, _ := logits(f32)
	seen := map[gguf.Type]bool{}
	for _, w := range m.weights() {
		seen[w.fileType] = true
		if !computes(w.typ) {
			t.Errorf("%s: %s left in a type the kernels do not read", w.name, w.typ)
		}
	}
	for _, typ := range types {
		if !seen[typ] {
			t.Errorf("no tensor of %s was loaded", typ)
		}
	}
	var spread float64
	for _, v := range want {
		spread = max(spread, math.Abs(float64(v)))
	}
	d := maxAbsDiff(got, want)
	t.Logf("max |Δlogit| %.3g (largest |logit| %.3g)", d, spread)
	if d > 0.05*spread {
		t.Errorf("mixed-type logits differ from the F32 decoding by %.3g (largest logit %.3g)", d, spread)
	}
}

// TestUnsupportedTypeRefused: a file with a tensor of a type the engine cannot load is refused
// with one line naming the tensor, its type and what is supported.
func TestUnsupportedTypeRefused(t *testing.T) {
	base := writeTiny(t, tinySpec{arch: "llama", typ: gguf.TypeF32, dim: 256, layers: 1, heads: 4, kvHeads: 2, ffn: 256, ctx: 256, seed: 3})
	f, err := gguf.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		w.CopyValue(f, k)
	}
	for _, ti := range f.Tensors {
		_, data, _ := f.Tensor(ti.Name)
		if ti.Name == "blk.0.ffn_down.weight" {
			w.AddTensor(ti.Name, gguf.TypeIQ2_XXS, ti.Dims, make([]byte, ti.Elements()/256*66))
			continue
		}
		w.AddTensor(ti.Name, ti.Type, ti.Dims, data)
	}
	path := filepath.Join(t.TempDir(), "iq2.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{ModelPath: path, Threads: 1})
	if !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("Open: %v, want ErrUnsupportedType", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "tensor blk.0.ffn_down.weight has type IQ2_XXS, which the engine does not compute; supported: ") ||
		!strings.Contains(msg, "Q4_K") || strings.Contains(msg, "\n") {
		t.Fatalf("refusal %q does not name the tensor, its type and the supported types on one line", msg)
	}
}

// TestModelInfo: the loading message names the architecture, the file's types with counts, the
// conversions, the context and the template.
func TestModelInfo(t *testing.T) {
	mixed, _ := mixedModel(t, []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ5_0})
	e, err := Open(Config{ModelPath: mixed, Threads: 1, ContextSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	s := info.String()
	t.Log(s)
	for _, want := range []string{"llama, 2 layers, dim 256", "Q4_K ×", "Q6_K ×", "Q5_0 ×", "F32 ×", "BF16 ×",
		"converted at load: ", "→ Q8_0", "BF16 ×2 → F32", "context 128 (trained 256)", "template "} {
		if !strings.Contains(s, want) {
			t.Errorf("loading message %q lacks %q", s, want)
		}
	}
}
