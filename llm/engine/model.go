package engine

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// ropeStyle says which element pairs RoPE rotates.
type ropeStyle int

const (
	ropeNorm ropeStyle = iota // adjacent pairs (x[2i], x[2i+1]): llama
	ropeNeox                  // half split (x[i], x[i+n/2]): qwen2, qwen3
)

// hyperParams are the model dimensions read from the GGUF metadata.
type hyperParams struct {
	arch      string
	vocab     int
	dim       int // n_embd
	layers    int
	heads     int
	kvHeads   int
	headDim   int // key/query head size
	valueDim  int // value head size
	ffn       int
	ctxTrain  int
	rmsEps    float32
	ropeBase  float32
	ropeDims  int
	rope      ropeStyle
	qkvBias   bool // qwen2
	qkNorm    bool // qwen3
	tiedOut   bool // no output.weight: logits use token_embd
	ropeFreqs []float32

	// Gemma 3 (arch_gemma.go); zero values leave the other architectures as they are.
	embScale    float32 // token embeddings are multiplied by it (√dim); 0 = no scaling
	ropeScale   float32 // linear RoPE scaling of the global layers (position × ropeScale); 0 = 1
	ropeBaseSWA float32 // RoPE base of the sliding-window layers
	swaWindow   int     // a sliding-window layer's query sees the swaWindow latest positions
	swa         []bool  // per layer: sliding-window attention
	attnScale   float32 // scale of q·k; 0 = 1/√headDim
	postNorms   bool    // RMS norms after attention and after the FFN, before the residual adds
	gelu        bool    // the FFN gate is GELU (tanh form), not SiLU
	softcap     float32 // final logits become softcap·tanh(logit/softcap); 0 = none

	// noRopeStep: every noRopeStep-th layer (1-based) has no RoPE (SmolLM3's NoPE layers); 0 = none.
	noRopeStep int

	kvHalf bool // KV caches are fp16 (chosen by the engine, not read from the file)
}

func (h *hyperParams) qDim() int  { return h.heads * h.headDim }
func (h *hyperParams) kvDim() int { return h.kvHeads * h.headDim }
func (h *hyperParams) vDim() int  { return h.kvHeads * h.valueDim }

// weight is one matrix (or vector) used in place inside the mapped file.
type weight struct {
	name string
	typ  gguf.Type
	rows int // ne1 (1 for vectors)
	cols int // ne0, the contiguous dimension
	raw  []byte
	f32  []float32 // raw viewed as float32 when typ is F32
	// fileType is the type stored in the file; typ differs when the
	// weight was converted at load (convert).
	fileType gguf.Type
	// owned: raw was allocated by the engine (a converted weight), not
	// mapped from the file.
	owned bool
	// packed: raw holds Q8_0 or Q4_0 rows in kernels.PackQ8_0's or
	// kernels.PackQ4_0's layout (set by copyWeights), which the packed
	// kernels read for one row and for many.
	packed bool
}

// quantized reports whether the model's layer matrices are quantized;
// such models get an fp16 KV cache unless Config.KVF32 says otherwise.
func (m *model) quantized() bool {
	for i := range m.layers {
		switch m.layers[i].wq.typ {
		case gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ5_1:
			return true
		}
	}
	return false
}

// packable reports whether w can be repacked for the packed kernels.
func (w *weight) packable() bool {
	return (w.typ == gguf.TypeQ8_0 || w.typ == gguf.TypeQ4_0) && w.rows > 1
}

// storedBytes is the size of w once copied, packed or not.
func (w *weight) storedBytes(pack bool) int {
	switch {
	case pack && w.typ == gguf.TypeQ4_0:
		return kernels.PackedQ4_0Size(w.rows, w.cols)
	case pack:
		return kernels.PackedQ8_0Size(w.rows, w.cols)
	}
	return len(w.raw)
}

// rowBytes is the storage size of one row.
func (w *weight) rowBytes() int { return w.cols / w.typ.BlockSize() * w.typ.BlockBytes() }

// needsQ8 reports whether the matmul kernels want the input as Q8_0.
func (w *weight) needsQ8() bool { return w.typ != gguf.TypeF32 && w.typ != gguf.TypeF16 }

type layerWeights struct {
	attnNorm, ffnNorm *weight
	wq, wk, wv, wo    *weight
	bq, bk, bv        *weight // qwen2
	qNorm, kNorm      *weight // qwen3, gemma3
	wGate, wUp, wDown *weight

	attnPostNorm, ffnPostNorm *weight // gemma3
}

// model is the immutable part of a loaded GGUF: hyper-parameters and
// weights pointing into the mapping. It is shared by every sequence.
type model struct {
	hp         hyperParams
	tokEmbd    *weight
	outputNorm *weight
	output     *weight
	layers     []layerWeights
}

func archKey(arch, key string) string { return arch + "." + key }

// maxVocab bounds a model's vocabulary (the largest in use are ~256k).
const maxVocab = 1 << 22

// readHyperParams reads and checks the dimensions of a llama, qwen2, qwen3, gemma3 or smollm3 GGUF.
func readHyperParams(f *gguf.File) (hyperParams, error) {
	var hp hyperParams
	arch, ok := f.String("general.architecture")
	if !ok {
		return hp, fmt.Errorf("%w: general.architecture", ErrMissingKey)
	}
	hp.arch = arch
	switch arch {
	case "llama":
		hp.rope = ropeNorm
	case "qwen2":
		hp.rope = ropeNeox
		hp.qkvBias = true
	case "qwen3":
		hp.rope = ropeNeox
		hp.qkNorm = true
	case "smollm3":
		hp.rope = ropeNorm
		hp.noRopeStep = 4 // llama.cpp's n_no_rope_layer_step: layers 3, 7, 11, ... skip RoPE
	case "gemma3":
		hp.rope = ropeNeox
		hp.qkNorm = true
		hp.postNorms = true
		hp.gelu = true
	default:
		return hp, fmt.Errorf("%w: %q (supported: llama, qwen2, qwen3, gemma3, smollm3)", ErrUnsupportedArch, arch)
	}
	need := func(key string) (int, error) {
		v, ok := f.Uint(archKey(arch, key))
		if !ok {
			return 0, fmt.Errorf("%w: %s", ErrMissingKey, archKey(arch, key))
		}
		if v == 0 || v > 1<<30 {
			return 0, fmt.Errorf("%w: %s = %d is out of range", ErrBadShape, archKey(arch, key), v)
		}
		return int(v), nil
	}
	optional := func(key string, def int) int {
		if v, ok := f.Uint(archKey(arch, key)); ok && v > 0 && v < 1<<30 {
			return int(v)
		}
		return def
	}
	var err error
	if hp.dim, err = need("embedding_length"); err != nil {
		return hp, err
	}
	if hp.layers, err = need("block_count"); err != nil {
		return hp, err
	}
	if hp.ffn, err = need("feed_forward_length"); err != nil {
		return hp, err
	}
	if hp.heads, err = need("attention.head_count"); err != nil {
		return hp, err
	}
	hp.kvHeads = optional("attention.head_count_kv", hp.heads)
	if hp.heads%hp.kvHeads != 0 {
		return hp, fmt.Errorf("%w: head_count %d is not a multiple of head_count_kv %d", ErrBadShape, hp.heads, hp.kvHeads)
	}
	hp.headDim = optional("attention.key_length", hp.dim/hp.heads)
	hp.valueDim = optional("attention.value_length", hp.headDim)
	if hp.valueDim != hp.headDim {
		return hp, fmt.Errorf("%w: value_length %d differs from key_length %d", ErrBadShape, hp.valueDim, hp.headDim)
	}
	hp.ctxTrain = optional("context_length", 2048)
	hp.ropeDims = optional("rope.dimension_count", hp.headDim)
	if hp.ropeDims > hp.headDim || hp.ropeDims%2 != 0 {
		return hp, fmt.Errorf("%w: rope.dimension_count %d for head size %d", ErrBadShape, hp.ropeDims, hp.headDim)
	}
	hp.ropeBase = 10000
	if v, ok := f.Float(archKey(arch, "rope.freq_base")); ok && v > 0 {
		hp.ropeBase = float32(v)
	}
	hp.rmsEps = 1e-5
	if v, ok := f.Float(archKey(arch, "attention.layer_norm_rms_epsilon")); ok && v > 0 {
		hp.rmsEps = float32(v)
	}
	if arch == "gemma3" {
		if err := readGemma3(f, &hp); err != nil {
			return hp, err
		}
	}
	return hp, nil
}

// loadModel maps every tensor the architecture needs and validates its shape.
func loadModel(f *gguf.File) (*model, error) {
	hp, err := readHyperParams(f)
	if err != nil {
		return nil, err
	}
	if err := checkTypes(f); err != nil {
		return nil, err
	}
	m := &model{hp: hp}
	get := func(name string, dims ...int) (*weight, error) {
		ti, data, ok := f.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrMissingTensor, name)
		}
		return makeWeight(ti, data, dims)
	}
	optional := func(name string, dims ...int) (*weight, error) {
		if _, _, ok := f.Tensor(name); !ok {
			return nil, nil
		}
		return get(name, dims...)
	}
	// token_embd fixes the vocabulary size.
	ti, _, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("%w: token_embd.weight", ErrMissingTensor)
	}
	if len(ti.Dims) != 2 {
		return nil, fmt.Errorf("%w: token_embd.weight has %d dims, want 2", ErrBadShape, len(ti.Dims))
	}
	if ti.Dims[1] == 0 || ti.Dims[1] > maxVocab {
		return nil, fmt.Errorf("%w: token_embd.weight has a vocabulary of %d (want 1..%d)", ErrBadShape, ti.Dims[1], maxVocab)
	}
	m.hp.vocab = int(ti.Dims[1])
	hp = m.hp
	if m.tokEmbd, err = get("token_embd.weight", hp.dim, hp.vocab); err != nil {
		return nil, err
	}
	if m.outputNorm, err = get("output_norm.weight", hp.dim); err != nil {
		return nil, err
	}
	if m.output, err = optional("output.weight", hp.dim, hp.vocab); err != nil {
		return nil, err
	}
	if m.output == nil {
		m.output = m.tokEmbd
		m.hp.tiedOut = true
	}
	if rf, err := optional("rope_freqs.weight", hp.ropeDims/2); err != nil {
		return nil, err
	} else if rf != nil {
		if rf.typ != gguf.TypeF32 {
			return nil, fmt.Errorf("%w: rope_freqs.weight is %s, want F32", ErrUnsupportedType, rf.typ)
		}
		m.hp.ropeFreqs = rf.f32
	}
	m.layers = make([]layerWeights, hp.layers)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		steps := []struct {
			dst  **weight
			name string
			dims []int
			opt  bool
		}{
			{&l.attnNorm, "attn_norm.weight", []int{hp.dim}, false},
			{&l.wq, "attn_q.weight", []int{hp.dim, hp.qDim()}, false},
			{&l.wk, "attn_k.weight", []int{hp.dim, hp.kvDim()}, false},
			{&l.wv, "attn_v.weight", []int{hp.dim, hp.vDim()}, false},
			{&l.wo, "attn_output.weight", []int{hp.qDim(), hp.dim}, false},
			{&l.ffnNorm, "ffn_norm.weight", []int{hp.dim}, false},
			{&l.wGate, "ffn_gate.weight", []int{hp.dim, hp.ffn}, false},
			{&l.wUp, "ffn_up.weight", []int{hp.dim, hp.ffn}, false},
			{&l.wDown, "ffn_down.weight", []int{hp.ffn, hp.dim}, false},
			{&l.bq, "attn_q.bias", []int{hp.qDim()}, !hp.qkvBias},
			{&l.bk, "attn_k.bias", []int{hp.kvDim()}, !hp.qkvBias},
			{&l.bv, "attn_v.bias", []int{hp.vDim()}, !hp.qkvBias},
			{&l.qNorm, "attn_q_norm.weight", []int{hp.headDim}, !hp.qkNorm},
			{&l.kNorm, "attn_k_norm.weight", []int{hp.headDim}, !hp.qkNorm},
			{&l.attnPostNorm, "post_attention_norm.weight", []int{hp.dim}, !hp.postNorms},
			{&l.ffnPostNorm, "post_ffw_norm.weight", []int{hp.dim}, !hp.postNorms},
		}
		for _, s := range steps {
			var w *weight
			if s.opt {
				w, err = optional(p+s.name, s.dims...)
			} else {
				w, err = get(p+s.name, s.dims...)
			}
			if err != nil {
				return nil, err
			}
			if w != nil && len(s.dims) == 1 && w.typ != gguf.TypeF32 {
				return nil, fmt.Errorf("%w: %s is %s, vectors must be F32", ErrUnsupportedType, w.name, w.typ)
			}
			*s.dst = w
		}
	}
	if m.outputNorm.typ != gguf.TypeF32 {
		return nil, fmt.Errorf("%w: output_norm.weight is %s, vectors must be F32", ErrUnsupportedType, m.outputNorm.typ)
	}
	return m, nil
}

// makeWeight checks a tensor's dims and type and wraps its bytes without copying.
func makeWeight(ti gguf.TensorInfo, data []byte, dims []int) (*weight, error) {
	match := len(ti.Dims) == len(dims)
	// Trailing 1s are allowed (a vector stored as [n, 1]).
	if !match && len(ti.Dims) > len(dims) {
		match = true
		for _, d := range ti.Dims[len(dims):] {
			if d != 1 {
				match = false
			}
		}
	}
	if match {
		for i, d := range dims {
			if ti.Dims[i] != uint64(d) {
				match = false
			}
		}
	}
	if !match {
		return nil, fmt.Errorf("%w: %s has dims %v, want %v", ErrBadShape, ti.Name, ti.Dims, dims)
	}
	if !computes(ti.Type) && !quant.CanDequantize(ti.Type) {
		return nil, unsupportedTensor(ti)
	}
	w := &weight{name: ti.Name, typ: ti.Type, fileType: ti.Type, cols: dims[0], rows: 1, raw: data}
	if len(dims) > 1 {
		w.rows = dims[1]
	}
	if w.cols%ti.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: %s row length %d is not a multiple of the %s block size %d", ErrBadShape, ti.Name, w.cols, ti.Type, ti.Type.BlockSize())
	}
	if hi, want := bits.Mul64(uint64(w.rows), uint64(w.rowBytes())); hi != 0 || uint64(len(data)) < want {
		return nil, fmt.Errorf("%w: %s holds %d bytes, want %d rows of %d", ErrBadShape, ti.Name, len(data), w.rows, w.rowBytes())
	}
	w.raw = data[:w.rows*w.rowBytes()]
	if !computes(ti.Type) || (len(dims) == 1 && ti.Type != gguf.TypeF32) {
		if err := w.convert(len(dims) == 1); err != nil {
			return nil, err
		}
		return w, nil
	}
	if ti.Type == gguf.TypeF32 {
		if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
			return nil, fmt.Errorf("%w: %s is not 4-byte aligned in the file", ErrBadShape, ti.Name)
		}
		w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(w.raw))), w.rows*w.cols)
	}
	return w, nil
}

// weights lists every distinct weight of the model.
func (m *model) weights() []*weight {
	ws := []*weight{m.tokEmbd, m.outputNorm}
	if m.output != m.tokEmbd {
		ws = append(ws, m.output)
	}
	for i := range m.layers {
		l := &m.layers[i]
		for _, w := range []*weight{l.attnNorm, l.ffnNorm, l.wq, l.wk, l.wv, l.wo, l.bq, l.bk, l.bv, l.qNorm, l.kNorm, l.wGate, l.wUp, l.wDown, l.attnPostNorm, l.ffnPostNorm} {
			if w != nil {
				ws = append(ws, w)
			}
		}
	}
	return ws
}

// copyWeights moves every weight from the file mapping into one anonymous
// huge-page arena and releases the mapped pages. Measured on the 2-vCPU
// dev VM (Q8_0 matvec over all 500 MB of a Qwen2.5-0.5B-shaped model, one
// thread): 365-650 ms CPU from the 4 KiB page-cache mapping against 63-110
// ms from anonymous memory. The resident size stays about the same (the
// copy replaces the mapped pages); loading reads the file once more.
func (m *model) copyWeights(repack bool) (release func() error, err error) {
	const align = 64
	ws := m.weights()
	total := 0
	for _, w := range ws {
		total += (w.storedBytes(repack && w.packable()) + align - 1) &^ (align - 1)
	}
	arena, release, err := allocArena(total)
	if err != nil {
		return nil, err
	}
	off := 0
	for _, w := range ws {
		pack := repack && w.packable()
		n := w.storedBytes(pack)
		dst := arena[off : off+n : off+n]
		if pack {
			if w.typ == gguf.TypeQ4_0 {
				kernels.PackQ4_0(dst, w.raw, w.rows, w.cols)
			} else {
				kernels.PackQ8_0(dst, w.raw, w.rows, w.cols)
			}
			w.packed = true
		} else {
			copy(dst, w.raw)
		}
		if !w.owned {
			dropMapped(w.raw)
		}
		w.raw, w.owned = dst, false
		if w.typ == gguf.TypeF32 {
			w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), n/4)
		}
		off += (n + align - 1) &^ (align - 1)
	}
	if m.hp.ropeFreqs != nil {
		m.hp.ropeFreqs = append([]float32(nil), m.hp.ropeFreqs...)
	}
	return release, nil
}
