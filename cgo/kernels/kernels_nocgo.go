//go:build !cgo || !amd64

package kernels

// Without cgo (or off amd64) only the portable Go path exists; the simd* hooks are never reached
// because detectLevel reports generic, but they stay correct if they were.

func detectLevel() level { return levelGeneric }

func simdQuantizeQ8_0(dst []byte, x []float32, _ int) { genericQuantizeQ8_0(dst, x) }
func simdDotF32(a, b []float32) float32               { return genericDotF32(a, b) }
func simdMatVecF32(out, w []float32, cols, r0, r1 int, x []float32) {
	genericMatVecF32(out, w, cols, r0, r1, x)
}
func simdMatVecF16(out []float32, w []byte, cols, r0, r1 int, x []float32) {
	genericMatVecF16(out, w, cols, r0, r1, x)
}
func simdMatVecQ8_0(_ level, out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	genericMatVecQ8_0(out, w, cols, r0, r1, xq)
}
func simdMatVecQ4_0(_ level, out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	genericMatVecQ4_0(out, w, cols, r0, r1, xq)
}
func simdMatMulF32(out []float32, ldo int, w []float32, cols, r0, r1 int, x []float32, n int) {
	genericMatMulF32(out, ldo, w, cols, r0, r1, x, n)
}
func simdMatMulQ8_0(_ level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	genericMatMulQ8_0(out, ldo, w, cols, r0, r1, xq, n)
}
func simdMatMulQ4_0(_ level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	genericMatMulQ4_0(out, ldo, w, cols, r0, r1, xq, n)
}
func simdMatMulF16(out []float32, ldo int, w []byte, cols, r0, r1 int, x []float32, n int) {
	genericMatMulF16(out, ldo, w, cols, r0, r1, x, n)
}
func simdMatVecF32Ld(out, w []float32, ldw, cols, r0, r1 int, x []float32) {
	genericMatVecF32Ld(out, w, ldw, cols, r0, r1, x)
}
func simdMatMulF32Ld(out []float32, ldo int, w []float32, ldw, cols, r0, r1 int, x []float32, ldx, n int) {
	genericMatMulF32Ld(out, ldo, w, ldw, cols, r0, r1, x, ldx, n)
}

func simdMatMulPackedQ8_0(_ level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	genericMatMulPackedQ8_0(out, ldo, w, cols, r0, r1, xq, n)
}

func simdMatMulPackedQ4_0(_ level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	genericMatMulPackedQ4_0(out, ldo, w, cols, r0, r1, xq, n)
}

func simdSwiGLU(g, u []float32)                       { genericSwiGLU(g, u) }
func simdSoftmax(s []float32, scale float32)          { genericSoftmax(s, scale) }
func simdSwiGLURows(g, u []float32, ld, n, width int) { genericSwiGLURows(g, u, ld, n, width) }
func simdRope(x []float32, heads, hd int, cos, sin []float32, adjacent bool) {
	genericRope(x, heads, hd, cos, sin, adjacent)
}
func simdStoreKeyF16(k []uint16, hd, t int, row []float32) { genericStoreKeyF16(k, hd, t, row) }
func simdArgmax(x []float32) int                           { return genericArgmax(x) }
func simdRMSNorm(dst, src, w []float32, eps float32)       { genericRMSNorm(dst, src, w, eps) }

func simdAttend(_ level, out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	genericAttend(out, q, k, v, hd, npos, nq, scale, probs)
}

func simdAttendF16(_ level, out, q []float32, k, v []uint16, hd, npos, nq int, scale float32, probs []float32) {
	genericAttendF16(out, q, k, v, hd, npos, nq, scale, probs)
}
func simdF32ToF16(dst []uint16, src []float32) { genericF32ToF16(dst, src) }

func simdReadStream(p []byte) uint64 { return genericReadStream(p) }

func simdPrepareQ8(*Q8Prep) {}

func simdTilesQ8(*Q8Prep) {}

func simdMatMulPackedQ8_0Prepared(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep) {
	genericMatMulPackedQ8_0(out, ldo, w, p.cols, r0, r1, p.xq, p.n)
}

func simdMatMulPackedQ4_0AMX(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep, _ []byte) {
	genericMatMulPackedQ4_0(out, ldo, w, p.cols, r0, r1, p.xq, p.n)
}
func simdMatMulRowQuant(k rowQuant, _ level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	rq := rowQuants[k]
	genericMatMulK(out, ldo, w, cols, r0, r1, xq, n, cols/rq.qk*rq.bb, rq.dot)
}
