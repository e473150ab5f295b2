package quant

import (
	"bytes"
	"encoding/binary"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// sharedDir is the shared LLM fixtures folder (skips the test when absent).
func sharedDir(t *testing.T) string { t.Helper(); return testenv.SharedLLM(t) }

// TestMatchesLlamaQuantize: our Q8_0 of the F32 fixture must equal llama-quantize's output tensor
// for tensor, byte for byte, and carry the same metadata.
func TestMatchesLlamaQuantize(t *testing.T) {
	shared := sharedDir(t)
	for _, model := range []string{"llama-gqa-tiny", "qwen2-tiny", "qwen3-tiny", "stories260K"} {
		t.Run(model, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "q8.gguf")
			if err := QuantizeFile(filepath.Join(shared, model+"-f32.gguf"), out, gguf.TypeQ8_0); err != nil {
				t.Fatal(err)
			}
			got, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			want, err := gguf.Open(filepath.Join(shared, model+"-q8_0.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			if len(got.Tensors) != len(want.Tensors) {
				t.Fatalf("%d tensors, llama.cpp has %d", len(got.Tensors), len(want.Tensors))
			}
			for _, wt := range want.Tensors {
				gi, gd, ok := got.Tensor(wt.Name)
				_, wd, _ := want.Tensor(wt.Name)
				if !ok {
					t.Fatalf("tensor %s missing", wt.Name)
				}
				if gi.Type != wt.Type {
					t.Fatalf("tensor %s is %s, llama.cpp %s", wt.Name, gi.Type, wt.Type)
				}
				if !bytes.Equal(gd, wd) {
					t.Fatalf("tensor %s (%s) bytes differ from llama.cpp's", wt.Name, wt.Type)
				}
			}
			for _, k := range want.Keys() {
				gv, ok := got.Value(k)
				wv, _ := want.Value(k)
				if !ok {
					t.Errorf("metadata key %s missing", k)
					continue
				}
				if s1, s2 := fmtValue(gv), fmtValue(wv); s1 != s2 {
					t.Errorf("metadata %s = %.80s, llama.cpp %.80s", k, s1, s2)
				}
			}
			if len(got.Keys()) != len(want.Keys()) {
				t.Errorf("keys %v, llama.cpp %v", got.Keys(), want.Keys())
			}
		})
	}
}

func fmtValue(v any) string { return fmtAny(v) }

func fmtAny(v any) string {
	if s, ok := v.([]any); ok {
		var b bytes.Buffer
		for _, e := range s {
			b.WriteString(fmtAny(e))
			b.WriteByte(',')
		}
		return b.String()
	}
	return fmtScalar(v)
}

func fmtScalar(v any) string {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, v)
	if b.Len() == 0 {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return b.String()
}

// writeSmall writes a small random F32 (or F16) model with awkward shapes.
func writeSmall(t *testing.T, path string, src gguf.Type) map[string][]float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("general.file_type", uint32(0))
	w.Set("llama.block_count", uint32(1))
	vals := map[string][]float32{}
	add := func(name string, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
		}
		typ := src
		if len(dims) == 1 {
			typ = gguf.TypeF32
		}
		var data []byte
		if typ == gguf.TypeF16 {
			data = make([]byte, 2*n)
			for i, v := range x {
				h := kernels.F32ToF16(v)
				binary.LittleEndian.PutUint16(data[2*i:], h)
				x[i] = kernels.F16ToF32(h)
			}
		} else {
			data = make([]byte, 4*n)
			for i, v := range x {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		vals[name] = x
		w.AddTensor(name, typ, dims, data)
	}
	add("token_embd.weight", 64, 10)
	add("blk.0.attn_norm.weight", 64)
	add("blk.0.ffn_down.weight", 172, 64) // row length not a multiple of 32
	add("blk.0.ffn_up.weight", 96, 5)
	add("output.weight", 64, 10)
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestSmallFiles(t *testing.T) {
	dir := t.TempDir()
	for _, src := range []gguf.Type{gguf.TypeF32, gguf.TypeF16} {
		in := filepath.Join(dir, "in-"+src.String()+".gguf")
		vals := writeSmall(t, in, src)
		for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeF16, gguf.TypeF32} {
			out := filepath.Join(dir, src.String()+"-to-"+typ.String()+".gguf")
			if err := QuantizeFile(in, out, typ); err != nil {
				t.Fatalf("%s → %s: %v", src, typ, err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			ft, _ := f.Uint("general.file_type")
			if want, _ := FileType(typ); ft != uint64(want) {
				t.Errorf("%s: general.file_type %d, want %d", typ, ft, want)
			}
			if arch, _ := f.String("general.architecture"); arch != "llama" {
				t.Errorf("architecture %q lost", arch)
			}
			for name, x := range vals {
				ti, data, ok := f.Tensor(name)
				if !ok {
					t.Fatalf("%s: tensor %s missing", typ, name)
				}
				want := TargetType(gguf.TensorInfo{Name: name, Dims: ti.Dims, Type: src}, typ)
				if name == "blk.0.attn_norm.weight" {
					want = gguf.TypeF32
				}
				if ti.Type != want {
					t.Errorf("%s: tensor %s stored %s, want %s", typ, name, ti.Type, want)
				}
				got := make([]float32, len(x))
				decodeRow(got, data, ti.Type)
				// Error bounds relative to the largest weight (|w| ≲ 0.1): Q4_0 ≤ amax/8,
				// Q8_0 ≤ amax/127·0.57, F16 ≤ 2^-11 relative, F32 exact.
				var amax, maxErr float64
				for i := range x {
					amax = math.Max(amax, math.Abs(float64(x[i])))
					maxErr = math.Max(maxErr, math.Abs(float64(x[i]-got[i])))
				}
				bound := map[gguf.Type]float64{gguf.TypeQ4_0: amax / 8 * 1.01, gguf.TypeQ8_0: amax / 127 * 0.57,
					gguf.TypeF16: amax * 0x1p-11, gguf.TypeF32: 0}[ti.Type]
				if maxErr > bound {
					t.Errorf("%s: tensor %s (%s) max error %g > %g", typ, name, ti.Type, maxErr, bound)
				}
			}
			f.Close()
		}
	}
}

func TestBadTarget(t *testing.T) {
	if err := QuantizeFile("x", "y", gguf.TypeQ4_1); err == nil {
		t.Fatal("Q4_1 target accepted")
	}
}

// A Q8_0 model requantizes: to F32 exactly its dequantized values, to Q4_0
// within Q4_0's rounding of them (the self-draft), to Q8_0 unchanged.
func TestRequantizeFromQ8_0(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "f32.gguf")
	writeSmall(t, src, gguf.TypeF32)
	q8 := filepath.Join(dir, "q8.gguf")
	if err := QuantizeFile(src, q8, gguf.TypeQ8_0); err != nil {
		t.Fatal(err)
	}
	in, err := gguf.Open(q8)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ4_0, gguf.TypeQ8_0} {
		out := filepath.Join(dir, "q8-to-"+typ.String()+".gguf")
		if err := QuantizeFile(q8, out, typ); err != nil {
			t.Fatalf("Q8_0 → %s: %v", typ, err)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range in.Tensors {
			_, srcData, _ := in.Tensor(ti.Name)
			got, data, ok := f.Tensor(ti.Name)
			if !ok {
				t.Fatalf("%s: tensor %s missing", typ, ti.Name)
			}
			if want := TargetType(ti, typ); got.Type != want {
				t.Errorf("%s: tensor %s stored %s, want %s", typ, ti.Name, got.Type, want)
			}
			n := int(ti.Elements())
			ref, val := make([]float32, n), make([]float32, n)
			decodeRow(ref, srcData, ti.Type)
			decodeRow(val, data, got.Type)
			var amax, maxErr float64
			for i := range ref {
				amax = math.Max(amax, math.Abs(float64(ref[i])))
				maxErr = math.Max(maxErr, math.Abs(float64(ref[i]-val[i])))
			}
			bound := 0.0
			if got.Type == gguf.TypeQ4_0 && ti.Type != gguf.TypeQ4_0 {
				bound = amax / 8 * 1.01
			}
			if maxErr > bound {
				t.Errorf("Q8_0 → %s: tensor %s (%s) max error %g > %g", typ, ti.Name, got.Type, maxErr, bound)
			}
		}
		f.Close()
	}
}
