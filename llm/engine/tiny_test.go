package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// tinySpec describes a small random model written with gguf.Writer so the
// core tests run without ../shared.
type tinySpec struct {
	arch     string // llama, qwen2, qwen3
	typ      gguf.Type
	dim      int
	layers   int
	heads    int
	kvHeads  int
	headDim  int // 0 = dim/heads
	ffn      int
	ctx      int
	seed     uint64
	template string // tokenizer.chat_template, "" for none
	vocab    int    // pad the vocabulary to this size (0 = the tiny vocabulary)
}

func defaultTiny(arch string, typ gguf.Type) tinySpec {
	s := tinySpec{arch: arch, typ: typ, dim: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128, ctx: 512, seed: 7}
	if arch == "qwen3" {
		s.headDim = 32
	}
	return s
}

// tinyVocab is a SentencePiece-style vocabulary: <unk>, <s>, </s>, the 256
// byte tokens, then whole words and letters.
func tinyVocab() (tokens []string, scores []float32, types []int32) {
	tokens = []string{"<unk>", "<s>", "</s>"}
	types = []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	words := []string{"▁hello", "▁world", "▁the", "▁a", "▁is", "▁cat", "▁dog", "▁sat", "▁on", "▁mat", "▁user", "▁assistant", "▁system", "▁you", "▁are", "▁helpful", "▁STOP", "."}
	for _, w := range words {
		tokens = append(tokens, w)
		types = append(types, 1)
	}
	for c := 'a'; c <= 'z'; c++ {
		tokens = append(tokens, "▁"+string(c), string(c))
		types = append(types, 1, 1)
	}
	tokens = append(tokens, "▁", ":", "\n")
	types = append(types, 1, 1, 1)
	for len(tokens)%32 != 0 {
		tokens = append(tokens, fmt.Sprintf("[pad%d]", len(tokens)))
		types = append(types, 5)
	}
	scores = make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
		if i >= 259 && i < 259+len(words) {
			scores[i] = 0 // prefer whole words
		}
	}
	return tokens, scores, types
}

// writeTiny writes the model and returns its path.
func writeTiny(t testing.TB, s tinySpec) string {
	t.Helper()
	if s.headDim == 0 {
		s.headDim = s.dim / s.heads
	}
	tokens, scores, types := tinyVocab()
	for len(tokens) < s.vocab {
		tokens = append(tokens, fmt.Sprintf("[pad%d]", len(tokens)))
		scores = append(scores, -float32(len(tokens)))
		types = append(types, 5)
	}
	vocab := len(tokens)
	w := gguf.NewWriter()
	w.Set("general.architecture", s.arch)
	w.Set("general.name", "tiny-"+s.arch)
	a := s.arch + "."
	w.Set(a+"context_length", uint32(s.ctx))
	w.Set(a+"embedding_length", uint32(s.dim))
	w.Set(a+"block_count", uint32(s.layers))
	w.Set(a+"feed_forward_length", uint32(s.ffn))
	w.Set(a+"attention.head_count", uint32(s.heads))
	w.Set(a+"attention.head_count_kv", uint32(s.kvHeads))
	w.Set(a+"attention.layer_norm_rms_epsilon", float32(1e-5))
	if s.arch != "llama" {
		w.Set(a+"rope.freq_base", float32(1e6))
	}
	if s.headDim != s.dim/s.heads {
		w.Set(a+"attention.key_length", uint32(s.headDim))
		w.Set(a+"attention.value_length", uint32(s.headDim))
	}
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.scores", scores)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	w.Set("tokenizer.ggml.add_bos_token", true)
	if s.template != "" {
		w.Set("tokenizer.chat_template", s.template)
	}
	rng := rand.New(rand.NewPCG(s.seed, 1))
	add := func(name string, typ gguf.Type, dims ...int) {
		n := 1
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.1)
		}
		if len(dims) == 1 && !strings.HasSuffix(name, ".bias") {
			for i := range x {
				x[i] = 1 + x[i]*0.5 // norms near 1
			}
		}
		udims := make([]uint64, len(dims))
		for i, d := range dims {
			udims[i] = uint64(d)
		}
		var data []byte
		switch typ {
		case gguf.TypeQ8_0:
			data = make([]byte, n/32*kernels.BlockQ8_0)
			kernels.QuantizeQ8_0(data, x)
		case gguf.TypeQ4_0:
			data = make([]byte, n/32*kernels.BlockQ4_0)
			kernels.QuantizeQ4_0(data, x)
		case gguf.TypeF16:
			data = make([]byte, 2*n)
			for i, v := range x {
				binary.LittleEndian.PutUint16(data[2*i:], kernels.F32ToF16(v))
			}
		default:
			data = make([]byte, 4*n)
			for i, v := range x {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		w.AddTensor(name, typ, udims, data)
	}
	qDim, kvDim := s.heads*s.headDim, s.kvHeads*s.headDim
	add("token_embd.weight", s.typ, s.dim, vocab)
	add("output_norm.weight", gguf.TypeF32, s.dim)
	if s.arch == "llama" {
		add("output.weight", s.typ, s.dim, vocab)
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", gguf.TypeF32, s.dim)
		add(p+"attn_q.weight", s.typ, s.dim, qDim)
		add(p+"attn_k.weight", s.typ, s.dim, kvDim)
		add(p+"attn_v.weight", s.typ, s.dim, kvDim)
		if s.arch == "qwen2" {
			add(p+"attn_q.bias", gguf.TypeF32, qDim)
			add(p+"attn_k.bias", gguf.TypeF32, kvDim)
			add(p+"attn_v.bias", gguf.TypeF32, kvDim)
		}
		if s.arch == "qwen3" {
			add(p+"attn_q_norm.weight", gguf.TypeF32, s.headDim)
			add(p+"attn_k_norm.weight", gguf.TypeF32, s.headDim)
		}
		add(p+"attn_output.weight", s.typ, qDim, s.dim)
		add(p+"ffn_norm.weight", gguf.TypeF32, s.dim)
		add(p+"ffn_gate.weight", s.typ, s.dim, s.ffn)
		add(p+"ffn_up.weight", s.typ, s.dim, s.ffn)
		add(p+"ffn_down.weight", s.typ, s.ffn, s.dim)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("tiny-%s-%s.gguf", s.arch, s.typ))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScoreMatchesIncrementalForward(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), nil)
	ids := []int32{1, 5, 9, 13, 2, 7, 7, 3}
	logProbs, greedyIDs, err := e.Score(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(logProbs) != len(ids)-1 || len(greedyIDs) != len(ids)-1 {
		t.Fatalf("have %d log-probs and %d greedy ids, want %d", len(logProbs), len(greedyIDs), len(ids)-1)
	}
	// Score has returned, so the scheduler is idle: feed the same tokens one
	// at a time and compare every position.
	kv := newKVCache(&e.model.hp, e.cfg.ContextSize)
	for i := 0; i < len(ids)-1; i++ {
		if err := e.rt.forward(context.Background(), kv, ids[i:i+1], i, nil); err != nil {
			t.Fatal(err)
		}
		want := logSoftmaxAt(e.rt.logits, int(ids[i+1]))
		if math.Abs(logProbs[i]-want) > 1e-4 || logProbs[i] > 0 {
			t.Fatalf("position %d: log-prob have %v, want %v", i, logProbs[i], want)
		}
		if g := argmax(e.rt.logits); g != greedyIDs[i] {
			t.Fatalf("position %d: greedy have %d, want %d", i, greedyIDs[i], g)
		}
	}
	if _, _, err := e.Score(context.Background(), ids[:1]); err == nil {
		t.Fatal("one token: want an error")
	}
}
