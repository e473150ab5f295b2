// Package synth writes random-weight GGUF models with the exact shapes, metadata and a usable
// byte-level BPE tokenizer of real small models, for benchmarking the engine against llama.cpp
// without downloading weights (`voxpipe llm synth`).
package synth

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// Shape is a model architecture with its hyper-parameters. Embeddings are tied (no output.weight).
type Shape struct {
	Name      string
	Arch      string // general.architecture: "llama", "qwen2", "gemma3" or "smollm3"
	Vocab     int
	Embd      int
	Layers    int
	Heads     int
	KVHeads   int
	FF        int
	Context   int
	RopeBase  float32
	RMSEps    float32
	Pre       string // tokenizer.ggml.pre
	QKVBias   bool   // qwen2: attn_{q,k,v}.bias
	AddBOS    bool
	ModelName string // general.name

	// Gemma 3: attention.key_length/value_length (0 = Embd/Heads), the sliding window (0 = none)
	// and its layer period (0 = leave the key out: llama.cpp's default of 6), the local layers'
	// RoPE base, linear RoPE scaling of the global layers (0 = none), final logit soft-capping
	// (0 = none). NormJitter draws norm weights as 1 + NormJitter·N(0, 1) instead of 1, so that
	// a test tells each norm apart.
	KeyLength     int
	SlidingWindow int
	SWAPattern    int
	RopeBaseSWA   float32
	RopeScale     float32
	Softcap       float32
	NormJitter    float64
}

var shapes = map[string]Shape{
	"smollm2-135m": {Name: "smollm2-135m", Arch: "llama", Vocab: 49152, Embd: 576, Layers: 30, Heads: 9, KVHeads: 3,
		FF: 1536, Context: 8192, RopeBase: 100000, RMSEps: 1e-5, Pre: "smollm", ModelName: "SmolLM2 135M (random weights)"},
	"qwen2.5-0.5b": {Name: "qwen2.5-0.5b", Arch: "qwen2", Vocab: 151936, Embd: 896, Layers: 24, Heads: 14, KVHeads: 2,
		FF: 4864, Context: 32768, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2", QKVBias: true,
		ModelName: "Qwen2.5 0.5B (random weights)"},
	"llama-1b": {Name: "llama-1b", Arch: "llama", Vocab: 128256, Embd: 2048, Layers: 16, Heads: 32, KVHeads: 8,
		FF: 8192, Context: 131072, RopeBase: 500000, RMSEps: 1e-5, Pre: "llama-bpe", AddBOS: true,
		ModelName: "Llama 3.2 1B (random weights)"},
	// Test shapes: seconds to write, milliseconds to run.
	"tiny": {Name: "tiny", Arch: "llama", Vocab: 512, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, FF: 128,
		Context: 256, RopeBase: 10000, RMSEps: 1e-5, Pre: "smollm", ModelName: "tiny llama (random weights)"},
	// Rows of 256: llama-quantize's K-quant presets keep their Q4_K/Q5_K/Q6_K types instead of
	// falling back to Q5_0/Q8_0 (the reference fixtures of K-quant files).
	"tiny-k": {Name: "tiny-k", Arch: "llama", Vocab: 512, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, FF: 256,
		Context: 256, RopeBase: 10000, RMSEps: 1e-5, Pre: "smollm", ModelName: "tiny K-quant llama (random weights)"},
	"tiny-qwen2": {Name: "tiny-qwen2", Arch: "qwen2", Vocab: 512, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, FF: 128,
		Context: 256, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2", QKVBias: true, ModelName: "tiny qwen2 (random weights)"},
	// SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config; llama layers with RoPE left out of every
	// fourth), and a tiny one with such a layer.
	"smollm3-3b": {Name: "smollm3-3b", Arch: "smollm3", Vocab: 128256, Embd: 2048, Layers: 36, Heads: 16, KVHeads: 4,
		FF: 11008, Context: 65536, RopeBase: 5e6, RMSEps: 1e-6, Pre: "llama-bpe", ModelName: "SmolLM3 3B (random weights)"},
	"tiny-smollm3": {Name: "tiny-smollm3", Arch: "smollm3", Vocab: 512, Embd: 64, Layers: 4, Heads: 4, KVHeads: 2, FF: 128,
		Context: 256, RopeBase: 5e6, RMSEps: 1e-6, Pre: "smollm", NormJitter: 0.3, ModelName: "tiny smollm3 (random weights)"},
	// Gemma 3's shapes (google/gemma-3-270m and gemma-3-1b configs: head_dim 256, one KV head,
	// 512-position sliding window on five layers of six, global RoPE base 1e6, local 10000).
	"gemma3-270m": {Name: "gemma3-270m", Arch: "gemma3", Vocab: 262144, Embd: 640, Layers: 18, Heads: 4, KVHeads: 1,
		KeyLength: 256, FF: 2048, Context: 32768, RopeBase: 1e6, RopeBaseSWA: 10000, RMSEps: 1e-6, SlidingWindow: 512,
		Pre: "smollm", AddBOS: true, ModelName: "Gemma 3 270M (random weights)"},
	"gemma3-1b": {Name: "gemma3-1b", Arch: "gemma3", Vocab: 262144, Embd: 1152, Layers: 26, Heads: 4, KVHeads: 1,
		KeyLength: 256, FF: 6912, Context: 32768, RopeBase: 1e6, RopeBaseSWA: 10000, RMSEps: 1e-6, SlidingWindow: 512,
		Pre: "smollm", AddBOS: true, ModelName: "Gemma 3 1B (random weights)"},
	// Every Gemma 3 feature in a few kilobytes: head size 32 ≠ 64/4, an 8-position window on two
	// layers of three (prompts longer than it exercise the window, unaligned starts included),
	// linear RoPE scaling 8 on the global layer (as Gemma 3 4B-27B), soft-capping, jittered norms.
	"tiny-gemma3": {Name: "tiny-gemma3", Arch: "gemma3", Vocab: 512, Embd: 64, Layers: 3, Heads: 4, KVHeads: 2,
		KeyLength: 32, FF: 128, Context: 256, RopeBase: 1e6, RopeBaseSWA: 10000, RMSEps: 1e-6, SlidingWindow: 8,
		SWAPattern: 3, RopeScale: 8, Softcap: 30, NormJitter: 0.3, Pre: "smollm", AddBOS: true,
		ModelName: "tiny gemma3 (random weights)"},
}

// Shapes lists the shape names Write accepts.
func Shapes() []string {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the named shape.
func Lookup(name string) (Shape, bool) {
	s, ok := shapes[name]
	return s, ok
}

// HeadDim is the per-head dimension.
func (s Shape) HeadDim() int {
	if s.KeyLength > 0 {
		return s.KeyLength
	}
	return s.Embd / s.Heads
}

// Params counts the model's parameters.
func (s Shape) Params() int64 {
	var n int64
	for _, t := range s.tensors() {
		n += int64(t.rows) * int64(t.cols)
	}
	return n
}

type tensorSpec struct {
	name       string
	cols, rows int // ne0, ne1 (rows = 1 for 1-D)
	ones       bool
	jitter     float64 // ones: 1 + jitter·N(0, 1)
}

// tensors lists the model's tensors in the order llama.cpp's converter writes them.
func (s Shape) tensors() []tensorSpec {
	hd := s.HeadDim()
	q, kv := s.Heads*hd, s.KVHeads*hd
	norm := func(name string, n int) tensorSpec {
		return tensorSpec{name: name, cols: n, rows: 1, ones: true, jitter: s.NormJitter}
	}
	gemma := s.Arch == "gemma3"
	ts := []tensorSpec{{name: "token_embd.weight", cols: s.Embd, rows: s.Vocab}}
	for l := 0; l < s.Layers; l++ {
		p := "blk." + strconv.Itoa(l) + "."
		ts = append(ts, norm(p+"attn_norm.weight", s.Embd),
			tensorSpec{name: p + "attn_q.weight", cols: s.Embd, rows: q},
			tensorSpec{name: p + "attn_k.weight", cols: s.Embd, rows: kv},
			tensorSpec{name: p + "attn_v.weight", cols: s.Embd, rows: kv})
		if s.QKVBias {
			ts = append(ts, tensorSpec{name: p + "attn_q.bias", cols: q, rows: 1},
				tensorSpec{name: p + "attn_k.bias", cols: kv, rows: 1},
				tensorSpec{name: p + "attn_v.bias", cols: kv, rows: 1})
		}
		if gemma {
			ts = append(ts, norm(p+"attn_q_norm.weight", hd), norm(p+"attn_k_norm.weight", hd))
		}
		ts = append(ts, tensorSpec{name: p + "attn_output.weight", cols: q, rows: s.Embd})
		if gemma {
			ts = append(ts, norm(p+"post_attention_norm.weight", s.Embd))
		}
		ts = append(ts, norm(p+"ffn_norm.weight", s.Embd),
			tensorSpec{name: p + "ffn_gate.weight", cols: s.Embd, rows: s.FF},
			tensorSpec{name: p + "ffn_up.weight", cols: s.Embd, rows: s.FF},
			tensorSpec{name: p + "ffn_down.weight", cols: s.FF, rows: s.Embd})
		if gemma {
			ts = append(ts, norm(p+"post_ffw_norm.weight", s.Embd))
		}
	}
	return append(ts, norm("output_norm.weight", s.Embd))
}

// Write writes a GGUF model of the named shape to path with weights of type typ (F32, F16, Q8_0
// or Q4_0; 1-D tensors are always F32, and Q4_0 models keep token_embd in Q8_0 like the
// llama.cpp anchor files). Weights are N(0, 0.02²), norms 1.0, drawn per tensor from seed so a
// given (shape, seed) always gives the same model. Rows are generated and quantized one at a time:
// memory stays at a row, whatever the model size.
func Write(path, shape string, typ gguf.Type, seed int64) error {
	s, ok := shapes[shape]
	if !ok {
		return fmt.Errorf("synth: shape %q (known: %v): %w", shape, Shapes(), ErrUnknownShape)
	}
	ftype, ok := quant.FileType(typ)
	if !ok {
		return fmt.Errorf("synth: type %s: %w", typ, ErrType)
	}
	meta := gguf.NewWriter()
	s.setMetadata(meta, ftype, typ)
	if err := setTokenizer(meta, s); err != nil {
		return err
	}
	specs := s.tensors()
	tensors := make([]quant.StreamTensor, len(specs))
	for i, ts := range specs {
		dims := []uint64{uint64(ts.cols), uint64(ts.rows)}
		if ts.rows == 1 {
			dims = dims[:1]
		}
		dst := quant.TargetType(gguf.TensorInfo{Name: ts.name, Dims: dims, Type: gguf.TypeF32}, typ)
		tensors[i] = quant.StreamTensor{Name: ts.name, Type: dst, Dims: dims, Emit: emitRandom(ts, dst, uint64(seed), uint64(i))}
	}
	if err := quant.WriteStreamed(path, meta, gguf.DefaultAlignment, tensors); err != nil {
		return fmt.Errorf("synth: %s: %w", shape, err)
	}
	return nil
}

func emitRandom(ts tensorSpec, typ gguf.Type, seed, index uint64) func(io.Writer) error {
	return func(w io.Writer) error {
		rng := rand.New(rand.NewPCG(seed, index))
		row := make([]float32, ts.cols)
		enc := quant.NewRowEncoder(typ, ts.cols)
		for r := 0; r < ts.rows; r++ {
			for i := range row {
				if ts.ones {
					row[i] = 1
					if ts.jitter != 0 {
						row[i] += float32(rng.NormFloat64() * ts.jitter)
					}
				} else {
					row[i] = float32(rng.NormFloat64() * 0.02)
				}
			}
			if _, err := w.Write(enc.Encode(row)); err != nil {
				return err
			}
		}
		return nil
	}
}

func (s Shape) setMetadata(w *gguf.Writer, ftype uint32, typ gguf.Type) {
	a := s.Arch + "."
	w.Set("general.architecture", s.Arch)
	w.Set("general.type", "model")
	w.Set("general.name", s.ModelName)
	w.Set(a+"vocab_size", uint32(s.Vocab))
	w.Set(a+"context_length", uint32(s.Context))
	w.Set(a+"embedding_length", uint32(s.Embd))
	w.Set(a+"block_count", uint32(s.Layers))
	w.Set(a+"feed_forward_length", uint32(s.FF))
	w.Set(a+"attention.head_count", uint32(s.Heads))
	w.Set(a+"attention.head_count_kv", uint32(s.KVHeads))
	w.Set(a+"rope.dimension_count", uint32(s.HeadDim()))
	w.Set(a+"rope.freq_base", s.RopeBase)
	w.Set(a+"attention.layer_norm_rms_epsilon", s.RMSEps)
	if s.KeyLength > 0 {
		w.Set(a+"attention.key_length", uint32(s.KeyLength))
		w.Set(a+"attention.value_length", uint32(s.KeyLength))
	}
	if s.SlidingWindow > 0 {
		w.Set(a+"attention.sliding_window", uint32(s.SlidingWindow))
		w.Set(a+"rope.freq_base_swa", s.RopeBaseSWA)
	}
	if s.SWAPattern > 0 {
		w.Set(a+"attention.sliding_window_pattern", uint32(s.SWAPattern))
	}
	if s.RopeScale > 0 {
		w.Set(a+"rope.scaling.type", "linear")
		w.Set(a+"rope.scaling.factor", s.RopeScale)
	}
	if s.Softcap > 0 {
		w.Set(a+"final_logit_softcapping", s.Softcap)
	}
	w.Set("general.file_type", ftype)
	if typ == gguf.TypeQ8_0 || typ == gguf.TypeQ4_0 {
		w.Set("general.quantization_version", uint32(2))
	}
}
