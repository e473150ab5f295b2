package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"unsafe"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// computes reports whether the engine's kernels read typ directly.
func computes(typ gguf.Type) bool {
	switch typ {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0:
		return true
	}
	return rowQuantKernel(typ) != nil
}

// rowQuantKernel is the product kernel of the quantized types computed in the file's row
// layout (Q8_0 activations), nil for the others. Q5_0 is not among them: it becomes Q8_0
// exactly at load (convert), whose packed kernels ran faster than the Q5_0 row kernel reading
// fewer bytes (see docs/models.md).
func rowQuantKernel(typ gguf.Type) func(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	switch typ {
	case gguf.TypeQ4_K:
		return kernels.MatMulQ4_K
	case gguf.TypeQ5_K:
		return kernels.MatMulQ5_K
	case gguf.TypeQ6_K:
		return kernels.MatMulQ6_K
	case gguf.TypeQ5_1:
		return kernels.MatMulQ5_1
	}
	return nil
}

// loadableTypes lists every tensor type a model file may hold: computed directly or converted
// at load.
func loadableTypes() []string {
	var names []string
	for _, t := range quant.DequantizableTypes() {
		names = append(names, t.String())
	}
	return names
}

// unsupportedTensor is the one-line refusal of a tensor whose type the engine cannot load.
func unsupportedTensor(ti gguf.TensorInfo) error {
	return fmt.Errorf("%w: tensor %s has type %s, which the engine does not compute; supported: %s",
		ErrUnsupportedType, ti.Name, ti.Type, strings.Join(loadableTypes(), ", "))
}

// checkTypes refuses a file holding a tensor of a type the engine cannot load, naming the first
// such tensor and every missing type, before any weight is touched.
func checkTypes(f *gguf.File) error {
	var first *gguf.TensorInfo
	missing := map[gguf.Type]int{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if computes(ti.Type) || quant.CanDequantize(ti.Type) {
			continue
		}
		if first == nil {
			first = ti
		}
		missing[ti.Type]++
	}
	if first == nil {
		return nil
	}
	err := unsupportedTensor(*first)
	if n := sumCounts(missing); n > 1 {
		err = fmt.Errorf("%w (%d tensors cannot load: %s)", err, n, typeCounts(missing))
	}
	return err
}

func sumCounts(m map[gguf.Type]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// typeCounts formats per-type tensor counts, most common first: "Q4_K ×120, Q6_K ×25".
func typeCounts(m map[gguf.Type]int) string {
	ts := make([]gguf.Type, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if m[ts[i]] != m[ts[j]] {
			return m[ts[i]] > m[ts[j]]
		}
		return ts[i] < ts[j]
	})
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s ×%d", t, m[t])
	}
	return strings.Join(parts, ", ")
}

// convert decodes w (a type with no kernel, or a vector that is not F32) into memory the engine
// owns: vectors and BF16 matrices become F32 (exact), other quantized matrices Q8_0, which the
// packed kernels compute (activations are Q8_0 for these types in llama.cpp too). Q5_0 and
// IQ4_NL, the fallbacks of Q4_K_M and IQ4 files, are integers times one scale per 32 and move
// to Q8_0 exactly; the others are re-rounded, Q8_0's per-32 scale keeping that far below the
// source type's own error.
func (w *weight) convert(vector bool) error {
	to := gguf.TypeQ8_0
	if vector || w.fileType == gguf.TypeBF16 || w.fileType == gguf.TypeF16 || w.fileType.BlockSize() == 1 {
		to = gguf.TypeF32
	}
	srcRow := w.rowBytes()
	dstRow := w.cols / to.BlockSize() * to.BlockBytes()
	out := make([]byte, w.rows*dstRow)
	if to == gguf.TypeQ8_0 && quant.TranscodeQ8_0(out, w.raw, w.fileType) {
		dropMapped(w.raw)                     // the file's pages are not read again
		w.typ, w.raw, w.owned = to, out, true // exact: the same scale and integers
		return nil
	}
	row := make([]float32, w.cols)
	for r := 0; r < w.rows; r++ {
		if err := quant.Dequantize(row, w.raw[r*srcRow:(r+1)*srcRow], w.fileType); err != nil {
			return fmt.Errorf("engine: %s: %w", w.name, err)
		}
		dst := out[r*dstRow : (r+1)*dstRow]
		if to == gguf.TypeQ8_0 {
			kernels.QuantizeQ8_0Ref(dst, row)
			continue
		}
		for i, v := range row {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
	dropMapped(w.raw)
	w.typ, w.raw, w.owned = to, out, true
	if to == gguf.TypeF32 {
		w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(out))), w.rows*w.cols)
	}
	return nil
}

// ModelInfo describes what a loaded model file holds and how the engine runs it.
type ModelInfo struct {
	Arch      string
	Layers    int
	Dim       int
	Vocab     int
	FileTypes string // the file's tensors per type, "Q4_K ×120, Q6_K ×25, F32 ×121"
	Converted string // types converted at load and what to, "Q5_0 ×96 → Q8_0"; "" when none
	Context   int    // tokens a sequence may hold
	CtxTrain  int    // the file's context_length
	Template  string
	// TemplateWarning says the file's chat template was not recognised and
	// Template is chat.Default; "" otherwise.
	TemplateWarning string
}

// String is the one-line loading message.
func (mi ModelInfo) String() string {
	s := fmt.Sprintf("%s, %d layers, dim %d, vocab %d; tensors %s", mi.Arch, mi.Layers, mi.Dim, mi.Vocab, mi.FileTypes)
	if mi.Converted != "" {
		s += "; converted at load: " + mi.Converted
	}
	s += fmt.Sprintf("; context %d (trained %d); template %s", mi.Context, mi.CtxTrain, mi.Template)
	if mi.TemplateWarning != "" {
		s += " (unrecognised chat template: the default)"
	}
	return s
}

// Info describes the loaded model.
func (e *Engine) Info() ModelInfo {
	m := e.model
	files := map[gguf.Type]int{}
	for _, ti := range e.file.Tensors {
		files[ti.Type]++
	}
	conv := map[string]int{}
	for _, w := range m.weights() {
		if w.typ != w.fileType {
			conv[fmt.Sprintf("%s → %s", w.fileType, w.typ)]++
		}
	}
	keys := make([]string, 0, len(conv))
	for k := range conv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		from, to, _ := strings.Cut(k, " → ")
		keys[i] = fmt.Sprintf("%s ×%d → %s", from, conv[k], to)
	}
	return ModelInfo{
		Arch: m.hp.arch, Layers: m.hp.layers, Dim: m.hp.dim, Vocab: m.hp.vocab,
		FileTypes: typeCounts(files), Converted: strings.Join(keys, ", "),
		Context: e.cfg.ContextSize, CtxTrain: m.hp.ctxTrain, Template: e.template,
		TemplateWarning: e.tmplWarn,
	}
}
