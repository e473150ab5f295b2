package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// streamBytes is the weight footprint of the streaming benchmarks: far beyond every cache level,
// so each call reads its rows from memory, as one decode step does with a model's weights.
const streamBytes = 96 << 20

// streamChunk is the rows per call, like the engine's row chunks (16..512 rows).
const streamChunk = 64

// randBlocks returns rows×cols of random Q8_0 (bb 34) or Q4_0 (bb 18) blocks with small valid
// fp16 scales; random bytes are enough to measure bandwidth and much faster than quantizing.
func randBlocks(rng *rand.Rand, rows, cols, bb int) []byte {
	w := make([]byte, rows*cols/QK*bb)
	for i := 0; i+8 <= len(w); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			w[i+k] = byte(v >> (8 * k))
		}
	}
	for b := 0; b+bb <= len(w); b += bb {
		h := F32ToF16(float32(rng.IntN(1000)+1) * 1e-5)
		w[b], w[b+1] = byte(h), byte(h>>8)
	}
	return w
}

// readSink keeps the "read" case's result alive.
var readSink uint64

// BenchmarkMatVecStream reports single-thread weight bandwidth (GB/s of weights read) of the
// matrix-vector products over a ~96 MiB matrix, called in engine-sized row chunks. F32 is the
// bandwidth reference: it does the least work per byte; "read" is ReadStream over the same bytes (the
// engine's bandwidth probe), "q8_0packed" and "q4_0packed" the packed layouts' one-row products (what Q8_0 and Q4_0 decoding run). The portable Go tier is left out (too slow for this size).
func BenchmarkMatVecStream(b *testing.B) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, cols := range []int{576, 1536, 4864} {
		xf := randF32(rng, cols, 1)
		xq := quantQ8(xf)
		kinds := []struct {
			name  string
			bytes int // per row
		}{{"q8_0", cols / QK * BlockQ8_0}, {"q8_0packed", cols / QK * BlockQ8_0}, {"q4_0", cols / QK * BlockQ4_0}, {"q4_0packed", cols / QK * BlockQ4_0}, {"f32", 4 * cols}, {"read", cols / QK * BlockQ8_0}}
		for _, k := range kinds {
			rows := streamBytes / k.bytes
			var run func()
			out := make([]float32, rows)
			switch k.name {
			case "q8_0", "q4_0":
				bb := BlockQ8_0
				mv := MatVecQ8_0
				if k.name == "q4_0" {
					bb, mv = BlockQ4_0, MatVecQ4_0
				}
				w := randBlocks(rng, rows, cols, bb)
				run = func() {
					for r := 0; r < rows; r += streamChunk {
						r1 := min(r+streamChunk, rows)
						mv(out[r:r1], w, cols, r, r1, xq)
					}
				}
			case "q8_0packed", "q4_0packed":
				bb, size, pack, mm := BlockQ8_0, PackedQ8_0Size, PackQ8_0, MatMulPackedQ8_0
				if k.name == "q4_0packed" {
					bb, size, pack, mm = BlockQ4_0, PackedQ4_0Size, PackQ4_0, MatMulPackedQ4_0
				}
				plain := randBlocks(rng, rows, cols, bb)
				w := make([]byte, size(rows, cols))
				pack(w, plain, rows, cols)
				chunk := (streamChunk + PackRows - 1) / PackRows * PackRows
				run = func() {
					for r := 0; r < rows; r += chunk {
						r1 := min(r+chunk, rows)
						mm(out, 0, w, cols, r, r1, xq, 1)
					}
				}
			case "read":
				w := randBlocks(rng, rows, cols, BlockQ8_0)
				run = func() { readSink ^= ReadStream(w) }
			case "f32":
				w := randF32(rng, rows*cols, 0.02)
				run = func() {
					for r := 0; r < rows; r += streamChunk {
						r1 := min(r+streamChunk, rows)
						MatVecF32(out[r:r1], w, cols, r, r1, xf)
					}
				}
			}
			b.Run(fmt.Sprintf("%s/cols%d", k.name, cols), func(b *testing.B) {
				for _, tier := range []string{"avx2", "avx512vnni", "amx"} {
					if ForceFeatures(tier) != nil {
						continue
					}
					b.Run(tier, func(b *testing.B) { loop(b, run, float64(rows*k.bytes)/1e9, "GB/s") })
				}
				UseGeneric(false)
			})
		}
	}
}
