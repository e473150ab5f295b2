// Package kernels holds the LLM engine's hot loops: fp16 conversion, Q8_0/Q4_0 (de)quantization and
// row-range matrix-vector / matrix-matrix products for F32, F16, Q8_0 and Q4_0 weights.
//
// With cgo on amd64 the products run in C with AVX2+FMA+F16C or AVX-512 VNNI code chosen once at
// start-up from the CPU's features, and on CPUs with AMX (Intel Sapphire Rapids and later) packed
// Q8_0 and Q4_0 products of 16 or more activation rows (prompts) use tile instructions; everything else (and every build without cgo) uses the portable
// Go versions in generic.go, which define the semantics the SIMD code is tested against.
//
// Quantized formats follow ggml exactly: a Q8_0 block is an fp16 scale d followed by 32 int8 q
// (value d·q); a Q4_0 block is an fp16 d followed by 16 bytes whose low nibbles are elements 0..15
// and high nibbles elements 16..31 (value (q-8)·d). Blocks run along a row.
//
// Numerics. Quantized products sum each block's 32 int8×int8 (or nibble×int8) products exactly in
// integers and scale by d_w·d_x in float32, as ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0 do; only the
// order of the float additions differs between tiers. Measured max |SIMD − generic| on random
// N(0,0.02) weights × N(0,1) activations: 7.6e-7 at 4864 columns (outputs of order 0.1–1), always
// inside the reordering bound (nb+4)·2⁻²³·Σ|block terms| the tests assert. AVX2 and AVX-512 VNNI
// give bit-identical results to each other, and on every tier MatVec and MatMul give bit-identical
// results for the same row pair, so batched prompts and one-token decoding agree exactly.
//
// Length contract: every function indexes its slices like ordinary Go code, so arguments that do
// not fit (short slices, cols not a multiple of 32, r0 > r1) panic exactly as an out-of-range slice
// index would. The C paths check the same bounds before touching memory.
package kernels

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Block geometry of the ggml quantized formats.
const (
	QK        = 32 // elements per Q8_0 / Q4_0 block
	BlockQ8_0 = 34 // bytes per Q8_0 block: fp16 d + 32 int8
	BlockQ4_0 = 18 // bytes per Q4_0 block: fp16 d + 16 nibble pairs
)

// level is a SIMD implementation tier.
type level int32

const (
	levelGeneric level = iota
	levelAVX2
	levelAVX512VNNI
	// levelAMX is levelAVX512VNNI with prompt-sized packed Q8_0 and Q4_0 products on AMX tiles.
	levelAMX
)

func (l level) String() string {
	switch l {
	case levelAVX2:
		return "avx2"
	case levelAVX512VNNI:
		return "avx512vnni"
	case levelAMX:
		return "amx"
	}
	return "generic"
}

var (
	// detected is the best tier this CPU (and build) supports; set once in init.
	detected = detectLevel()
	// active is the tier in use; tests lower it with UseGeneric / ForceFeatures.
	active atomic.Int32
)

// EnvVar names the environment variable that picks a tier at start-up ("generic", "avx2",
// "avx512vnni", "amx"), e.g. VOXPIPE_KERNELS=avx2 to run the anchor machine's code path on an AVX-512 CPU.
// Unknown or unsupported values are ignored (Features reports what is in use).
const EnvVar = "VOXPIPE_KERNELS"

func init() {
	active.Store(int32(detected))
	if name := os.Getenv(EnvVar); name != "" {
		_ = ForceFeatures(name)
	}
}

func currentLevel() level { return level(active.Load()) }

// Features names the implementation in use: "amx", "avx512vnni", "avx2" or "generic".
func Features() string { return currentLevel().String() }

// Detected names the best implementation this CPU and build support, whatever is forced.
func Detected() string { return detected.String() }

// UseGeneric forces the portable Go path process-wide (on) or restores the detected one (off),
// ignoring EnvVar.
// Meant for tests and comparisons; not safe to flip while products are running.
func UseGeneric(on bool) {
	if on {
		active.Store(int32(levelGeneric))
		return
	}
	active.Store(int32(detected))
}

// ForceFeatures selects an implementation by name ("generic", "avx2", "avx512vnni", "amx"), so that the
// AVX2 path, the one the benchmark anchor machine runs, can be tested on an AVX-512 machine.
// Selecting a tier above the detected one fails with ErrUnsupportedFeatures.
func ForceFeatures(name string) error {
	var want level
	switch name {
	case "generic":
		want = levelGeneric
	case "avx2":
		want = levelAVX2
	case "avx512vnni":
		want = levelAVX512VNNI
	case "amx":
		want = levelAMX
	default:
		return fmt.Errorf("kernels: feature set %q: %w (want generic, avx2, avx512vnni or amx)", name, ErrUnknownFeatures)
	}
	if want > detected {
		return fmt.Errorf("kernels: feature set %q on a CPU/build limited to %q: %w", name, detected, ErrUnsupportedFeatures)
	}
	active.Store(int32(want))
	return nil
}

// QuantizeQ8_0 quantizes activations x into Q8_0 blocks in dst exactly as llama.cpp's CPU backend
// does on x86 (quantize_row_q8_0, AVX2 branch): per block amax = max|x|, d = amax/127 stored as
// fp16 (round to nearest even), q = roundToEven(x·(127/amax)) computed in float32. The reference
// quantizer used for weights differs (see QuantizeQ8_0Ref); both give identical results on almost
// every input, but bit-exact agreement with llama.cpp's logits needs this one for activations.
// len(x) must be a multiple of 32 and len(dst) at least len(x)/32*34.
func QuantizeQ8_0(dst []byte, x []float32) {
	nb := checkQuant(len(dst), len(x), BlockQ8_0)
	if nb == 0 {
		return
	}
	if currentLevel() != levelGeneric {
		simdQuantizeQ8_0(dst, x, nb)
		return
	}
	genericQuantizeQ8_0(dst, x)
}

// QuantizeQ8_0Ref quantizes like ggml's quantize_row_q8_0_ref, which llama-quantize uses for
// weights: d = amax/127, q = roundHalfAwayFromZero(x·(1/d)), all in float32.
func QuantizeQ8_0Ref(dst []byte, x []float32) {
	checkQuant(len(dst), len(x), BlockQ8_0)
	genericQuantizeQ8_0Ref(dst, x)
}

// QuantizeQ4_0 quantizes like ggml's quantize_row_q4_0_ref (the weight quantizer): the element of
// largest magnitude, max, sets d = max/-8, q = min(15, trunc(x/d + 8.5)).
func QuantizeQ4_0(dst []byte, x []float32) {
	checkQuant(len(dst), len(x), BlockQ4_0)
	genericQuantizeQ4_0(dst, x)
}

// DequantizeQ8_0 expands Q8_0 blocks into dst (len(dst) elements, a multiple of 32).
func DequantizeQ8_0(dst []float32, src []byte) { genericDequantizeQ8_0(dst, src) }

// DequantizeQ4_0 expands Q4_0 blocks into dst (len(dst) elements, a multiple of 32).
func DequantizeQ4_0(dst []float32, src []byte) { genericDequantizeQ4_0(dst, src) }

// DequantizeF16 expands little-endian fp16 values into dst (len(dst) elements).
func DequantizeF16(dst []float32, src []byte) {
	_ = src[2*len(dst)-1:]
	for i := range dst {
		dst[i] = f16Table[uint16(src[2*i])|uint16(src[2*i+1])<<8]
	}
}

// DotF32 returns Σ a[i]·b[i] over len(a) elements (b at least as long).
func DotF32(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	_ = b[len(a)-1]
	if currentLevel() != levelGeneric {
		return simdDotF32(a, b)
	}
	return genericDotF32(a, b)
}

// MatVecF32 sets out[r-r0] = dot(w[r·cols:], x) for r in [r0, r1).
func MatVecF32(out, w []float32, cols, r0, r1 int, x []float32) {
	if !checkRows(len(out), r1-r0, len(w), cols, r0, r1, len(x), cols) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatVecF32(out, w, cols, r0, r1, x)
		return
	}
	genericMatVecF32(out, w, cols, r0, r1, x)
}

// MatVecF32Ld is MatVecF32 over the first cols columns of rows ldw floats apart (ldw ≥ cols):
// out[r-r0] = dot(w[r·ldw:r·ldw+cols], x). Results equal MatVecF32 on a matrix holding just
// those columns.
func MatVecF32Ld(out, w []float32, ldw, cols, r0, r1 int, x []float32) {
	if ldw < cols {
		panic(fmt.Sprintf("kernels: row stride %d < cols %d", ldw, cols))
	}
	if !checkRows(len(out), r1-r0, len(w)+ldw-cols, ldw, r0, r1, len(x), cols) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatVecF32Ld(out, w, ldw, cols, r0, r1, x)
		return
	}
	genericMatVecF32Ld(out, w, ldw, cols, r0, r1, x)
}

// MatMulF32Ld is MatMulF32 over the first cols columns of weight rows ldw floats apart and of
// activation rows ldx floats apart (ldw, ldx ≥ cols): out[j·ldo + r] = dot(w[r·ldw:][:cols],
// x[j·ldx:][:cols]). Results equal MatVecF32 on each pair, as MatMulF32's do.
func MatMulF32Ld(out []float32, ldo int, w []float32, ldw, cols, r0, r1 int, x []float32, ldx, n int) {
	if ldw < cols || ldx < cols {
		panic(fmt.Sprintf("kernels: row strides %d, %d < cols %d", ldw, ldx, cols))
	}
	if !checkMul(len(out), ldo, n, len(w)+ldw-cols, ldw, r0, r1, len(x)+ldx-cols, ldx) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulF32Ld(out, ldo, w, ldw, cols, r0, r1, x, ldx, n)
		return
	}
	genericMatMulF32Ld(out, ldo, w, ldw, cols, r0, r1, x, ldx, n)
}

// MatVecF16 sets out[r-r0] = dot(W[r], x) for r in [r0, r1), W being rows of cols fp16 values.
func MatVecF16(out []float32, w []byte, cols, r0, r1 int, x []float32) {
	if !checkRows(len(out), r1-r0, len(w), 2*cols, r0, r1, len(x), cols) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatVecF16(out, w, cols, r0, r1, x)
		return
	}
	genericMatVecF16(out, w, cols, r0, r1, x)
}

// MatMulF16 sets out[j·ldo + r] = dot(W[r], x[j·cols:]) for r in [r0, r1), j < n, W being rows of
// cols fp16 values (weights widened to float32; activations stay float32).
func MatMulF16(out []float32, ldo int, w []byte, cols, r0, r1 int, x []float32, n int) {
	if !checkMul(len(out), ldo, n, len(w), 2*cols, r0, r1, len(x), cols) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulF16(out, ldo, w, cols, r0, r1, x, n)
		return
	}
	genericMatMulF16(out, ldo, w, cols, r0, r1, x, n)
}

// MatVecQ8_0 sets out[r-r0] = dot(W[r], xq) for r in [r0, r1): Q8_0 weights against activations
// quantized with QuantizeQ8_0, summed per block in integers and scaled by d_w·d_x.
func MatVecQ8_0(out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	rb := rowBytes(cols, BlockQ8_0)
	if !checkRows(len(out), r1-r0, len(w), rb, r0, r1, len(xq), rb) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatVecQ8_0(currentLevel(), out, w, cols, r0, r1, xq)
		return
	}
	genericMatVecQ8_0(out, w, cols, r0, r1, xq)
}

// MatVecQ4_0 is MatVecQ8_0 for Q4_0 weights (activations still Q8_0).
func MatVecQ4_0(out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	if !checkRows(len(out), r1-r0, len(w), rowBytes(cols, BlockQ4_0), r0, r1, len(xq), rowBytes(cols, BlockQ8_0)) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatVecQ4_0(currentLevel(), out, w, cols, r0, r1, xq)
		return
	}
	genericMatVecQ4_0(out, w, cols, r0, r1, xq)
}

// MatMulF32 sets out[j·ldo + r] = dot(w[r·cols:], x[j·cols:]) for r in [r0, r1), j < n.
// Several rows of x are taken per weight row read, which is what makes batched prompts fast.
func MatMulF32(out []float32, ldo int, w []float32, cols, r0, r1 int, x []float32, n int) {
	if !checkMul(len(out), ldo, n, len(w), cols, r0, r1, len(x), cols) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulF32(out, ldo, w, cols, r0, r1, x, n)
		return
	}
	genericMatMulF32(out, ldo, w, cols, r0, r1, x, n)
}

// MatMulQ8_0 sets out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n, with X rows quantized
// by QuantizeQ8_0 and stored cols/32·34 bytes apart.
func MatMulQ8_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	rb := rowBytes(cols, BlockQ8_0)
	if !checkMul(len(out), ldo, n, len(w), rb, r0, r1, len(xq), rb) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulQ8_0(currentLevel(), out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulQ8_0(out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulQ4_0 is MatMulQ8_0 for Q4_0 weights.
func MatMulQ4_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if !checkMul(len(out), ldo, n, len(w), rowBytes(cols, BlockQ4_0), r0, r1, len(xq), rowBytes(cols, BlockQ8_0)) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulQ4_0(currentLevel(), out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulQ4_0(out, ldo, w, cols, r0, r1, xq, n)
}

// rowBytes is the storage size of one row of cols elements; cols must be a multiple of 32.
func rowBytes(cols, blockBytes int) int {
	if cols%QK != 0 {
		panic(fmt.Sprintf("kernels: row length %d is not a multiple of %d", cols, QK))
	}
	return cols / QK * blockBytes
}

func checkQuant(dstLen, xLen, blockBytes int) int {
	nb := rowBytes(xLen, blockBytes) / blockBytes
	if dstLen < nb*blockBytes {
		panic(fmt.Sprintf("kernels: quantize destination holds %d bytes, need %d", dstLen, nb*blockBytes))
	}
	return nb
}

// checkRows validates a MatVec call; it reports false when there is nothing to do.
func checkRows(outLen, outNeed, wLen, wRow, r0, r1, xLen, xNeed int) bool {
	if r0 < 0 || r1 < r0 {
		panic(fmt.Sprintf("kernels: bad row range [%d, %d)", r0, r1))
	}
	if r0 == r1 {
		return false
	}
	if outLen < outNeed || wLen < r1*wRow || xLen < xNeed {
		panic(fmt.Sprintf("kernels: matvec rows [%d,%d): out %d (need %d), w %d bytes/elems (need %d), x %d (need %d)",
			r0, r1, outLen, outNeed, wLen, r1*wRow, xLen, xNeed))
	}
	return true
}

// checkMul validates a MatMul call; it reports false when there is nothing to do.
func checkMul(outLen, ldo, n, wLen, wRow, r0, r1, xLen, xRow int) bool {
	if r0 < 0 || r1 < r0 || n < 0 {
		panic(fmt.Sprintf("kernels: bad row range [%d, %d) or n %d", r0, r1, n))
	}
	if r0 == r1 || n == 0 {
		return false
	}
	if ldo < r1 && n > 1 {
		panic(fmt.Sprintf("kernels: matmul ldo %d < r1 %d", ldo, r1))
	}
	if outLen < (n-1)*ldo+r1 || wLen < r1*wRow || xLen < n*xRow {
		panic(fmt.Sprintf("kernels: matmul rows [%d,%d) n %d: out %d (need %d), w %d (need %d), x %d (need %d)",
			r0, r1, n, outLen, (n-1)*ldo+r1, wLen, r1*wRow, xLen, n*xRow))
	}
	return true
}
