package engine

import (
	"context"
	"math"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// Parallel operations run through the pool.
const (
	opMat  = iota // up to three independent matrix products (q/k/v, wo, down, logits)
	opFFN         // gate and up over the same rows, then silu(gate)*up
	opAttn        // one (token, head) pair per chunk
	opRead        // the bandwidth probe: one rt.reads entry per chunk
)

// defaultBatch is how many prompt tokens go through one forward pass: every
// weight is read once per batch.
const defaultBatch = 64

// matTask is one matrix product of an opMat/opFFN job.
type matTask struct {
	w      *weight
	in     []float32       // rows of w.cols floats (F32/F16 weights)
	inQ    []byte          // the same rows as Q8_0 (Q8_0/Q4_0 weights)
	prep   *kernels.Q8Prep // inQ as prepared for packed weights (rt.prep); nil for the others
	out    []float32       // n rows of ldo floats; row r of w goes to column r
	ldo    int
	bias   []float32
	rpc    int // rows per chunk
	chunks int
}

// kvCache holds the keys and values of one sequence, per layer and KV
// head: keys in kernels.KeyBlock-position blocks, each [headDim][KeyBlock],
// so one key load scores a block of positions for every query head of the
// group; values as [position][headDim], accumulated row by row
// (kernels.Attend).
// Values are float32, or fp16 (half) for models with quantized matrices:
// attention reads every cached position for every new token of every
// sequence, so halving those bytes matters as conversations grow and as
// more sequences share a step (llama.cpp's default too). F32 and F16
// weight models keep float32 so their results stay exact.
type kvCache struct {
	k, v     [][]float32 // per layer: [kvHeads][cap][headDim] (float32 cache)
	k16, v16 [][]uint16  // the same as fp16 (half cache)
	half     bool
	kvHeads  int
	headDim  int
	cap      int // positions allocated, whole key blocks
	max      int // positions allowed (context size)
}

func newKVCache(hp *hyperParams, maxPos int) *kvCache {
	c := &kvCache{half: hp.kvHalf, kvHeads: hp.kvHeads, headDim: hp.headDim, max: maxPos}
	if c.half {
		c.k16, c.v16 = make([][]uint16, hp.layers), make([][]uint16, hp.layers)
	} else {
		c.k, c.v = make([][]float32, hp.layers), make([][]float32, hp.layers)
	}
	return c
}

// kvGrowStep keeps reallocations rare while a conversation grows.
const kvGrowStep = 256

// reserve makes room for positions [0, n). It allocates only when n
// crosses the current capacity.
func (c *kvCache) reserve(n int) {
	if n <= c.cap {
		return
	}
	newCap := (n + kvGrowStep - 1) / kvGrowStep * kvGrowStep
	newCap = min(newCap, (c.max+kernels.KeyBlock-1)/kernels.KeyBlock*kernels.KeyBlock)
	if c.half {
		growHeads(c.k16, c.kvHeads, c.headDim, c.cap, newCap)
		growHeads(c.v16, c.kvHeads, c.headDim, c.cap, newCap)
	} else {
		growHeads(c.k, c.kvHeads, c.headDim, c.cap, newCap)
		growHeads(c.v, c.kvHeads, c.headDim, c.cap, newCap)
	}
	c.cap = newCap
}

// growHeads reallocates every layer's [heads][cap·hd] values for newCap
// positions, keeping the old ones (a head's first oldCap positions are its
// first oldCap·hd values in both layouts, as caps are whole key blocks).
func growHeads[T float32 | uint16](layers [][]T, heads, hd, oldCap, newCap int) {
	for l := range layers {
		d := make([]T, heads*newCap*hd)
		for g := 0; g < heads && oldCap > 0; g++ {
			copy(d[g*newCap*hd:], layers[l][g*oldCap*hd:(g+1)*oldCap*hd])
		}
		layers[l] = d
	}
}

// kvHead returns KV head g of one layer's keys or values.
func kvHead[T float32 | uint16](c *kvCache, data []T, g int) []T {
	n := c.cap * c.headDim
	return data[g*n : (g+1)*n]
}

// store writes key and value rows for position p of layer l, head g.
func (c *kvCache) store(l, g, p int, k, v []float32) {
	hd := c.headDim
	if c.half {
		kernels.StoreKeyF16(kvHead(c, c.k16[l], g), hd, p, k)
		kernels.F32ToF16Row(kvHead(c, c.v16[l], g)[p*hd:(p+1)*hd], v)
		return
	}
	kernels.StoreKey(kvHead(c, c.k[l], g), hd, p, k)
	copy(kvHead(c, c.v[l], g)[p*hd:(p+1)*hd], v)
}

// bytes is the memory held by the cache.
func (c *kvCache) bytes() int64 {
	elem := int64(4)
	if c.half {
		elem = 2
	}
	return int64(c.layers()) * 2 * int64(c.kvHeads) * int64(c.cap) * int64(c.headDim) * elem
}

func (c *kvCache) layers() int { return max(len(c.k), len(c.k16)) }

// compute owns the scratch buffers and the worker pool of one model. Only
// the scheduler goroutine uses it.
type compute struct {
	m        *model
	hp       *hyperParams
	threads  int
	maxBatch int
	ctxSize  int
	pool     *pool

	x, xb    []float32      // [batch][dim] residual stream and normed/scratch rows
	xq       []byte         // Q8_0 rows of the current matmul input
	prep     kernels.Q8Prep // xq prepared once for all the job's packed products
	q, k, v  []float32      // [batch][qDim|kvDim|vDim]
	att      []float32      // [batch][qDim]
	gate, up []float32      // [batch][ffn]
	logits   []float32      // [vocab] logits of the last token
	scratch  [][]float32    // per worker: attention probabilities, ctxSize floats per query head of a group
	invFreq  []float64      // RoPE inverse frequencies
	cos, sin []float32      // [batch][ropeDims/2]
	attScale float32

	// Sliding-window layers' RoPE (gemma3: another base, no scaling), and
	// per worker the keys of a window re-blocked to start at a block
	// (attendWindow).
	invFreqSWA     []float64
	cosSWA, sinSWA []float32
	winK           [][]float32
	winK16         [][]uint16

	// Current job parameters, written by the scheduler before pool.run.
	tasks  [3]matTask
	nTasks int
	n      int       // rows in the batch
	segs   []segment // the batch's sequences, in row order
	layer  int
	// prepInAttn: the attention job also prepares each row's heads
	// (prepHeads), as no row reads another's keys.
	prepInAttn bool

	reads []readChunk // opRead's chunks (BenchBandwidth)

	oneSeg [1]segment // forward's single segment
	rowIdx []int32    // 0, 1, ..., maxBatch-1: "every row" for logitsFor
	rowSeg []int32    // [batch] index into segs of each row
}

// segment is one sequence's run of consecutive rows in a batched forward
// pass: rows [start, start+n) hold its tokens at positions pos0.. and
// attend to its own KV cache. Continuous batching puts every active
// sequence in one pass, so each weight is read once for all of them.
type segment struct {
	kv    *kvCache
	pos0  int
	start int
	n     int
}

func newCompute(m *model, threads, ctxSize, maxBatch int) *compute {
	hp := &m.hp
	rt := &compute{m: m, hp: hp, threads: threads, maxBatch: maxBatch, ctxSize: ctxSize}
	b := maxBatch
	rt.x = make([]float32, b*hp.dim)
	rt.xb = make([]float32, b*hp.dim)
	widest := max(hp.dim, hp.qDim(), hp.ffn)
	rt.xq = make([]byte, b*(widest+31)/32*kernels.BlockQ8_0)
	rt.q = make([]float32, b*hp.qDim())
	rt.k = make([]float32, b*hp.kvDim())
	rt.v = make([]float32, b*hp.vDim())
	rt.att = make([]float32, b*hp.qDim())
	rt.gate = make([]float32, b*hp.ffn)
	rt.up = make([]float32, b*hp.ffn)
	rt.logits = make([]float32, hp.vocab)
	rt.scratch = make([][]float32, threads)
	for i := range rt.scratch {
		rt.scratch[i] = make([]float32, ctxSize*(hp.heads/hp.kvHeads))
	}
	half := hp.ropeDims / 2
	rt.invFreq = ropeInvFreq(hp, hp.ropeBase, hp.ropeScale)
	rt.cos = make([]float32, b*half)
	rt.sin = make([]float32, b*half)
	if hp.swa != nil {
		rt.invFreqSWA = ropeInvFreq(hp, hp.ropeBaseSWA, 0)
		rt.cosSWA = make([]float32, b*half)
		rt.sinSWA = make([]float32, b*half)
		rt.winK, rt.winK16 = make([][]float32, threads), make([][]uint16, threads)
	}
	rt.attScale = float32(1 / math.Sqrt(float64(hp.headDim)))
	if hp.attnScale != 0 {
		rt.attScale = hp.attnScale
	}
	rt.rowIdx = make([]int32, b)
	for i := range rt.rowIdx {
		rt.rowIdx[i] = int32(i)
	}
	rt.rowSeg = make([]int32, b)
	rt.pool = newPool(threads, rt)
	return rt
}

func (rt *compute) close() { rt.pool.close() }

// forward runs tokens at positions pos0.. through the model, appending
// their keys and values to kv. It leaves the logits of the last token in
// rt.logits; if all is non-nil it receives the logits of every token
// ([len(tokens)][vocab]). ctx (may be nil) is checked between layers.
func (rt *compute) forward(ctx context.Context, kv *kvCache, tokens []int32, pos0 int, all []float32) error {
	if pos0+len(tokens) > kv.max {
		return ErrContextFull
	}
	for start := 0; start < len(tokens); start += rt.maxBatch {
		end := min(start+rt.maxBatch, len(tokens))
		n := end - start
		rt.oneSeg[0] = segment{kv: kv, pos0: pos0 + start, n: n}
		var err error
		switch {
		case all != nil:
			err = rt.forwardBatch(ctx, tokens[start:end], rt.oneSeg[:], rt.rowIdx[:n], all[start*rt.hp.vocab:end*rt.hp.vocab])
			if err == nil && end == len(tokens) {
				copy(rt.logits, all[(end-1)*rt.hp.vocab:end*rt.hp.vocab])
			}
		case end == len(tokens):
			err = rt.forwardBatch(ctx, tokens[start:end], rt.oneSeg[:], rt.rowIdx[n-1:n], rt.logits)
		default:
			err = rt.forwardBatch(ctx, tokens[start:end], rt.oneSeg[:], nil, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rowsPerChunk picks a chunk height that gives each thread about two chunks
// to claim, so a slow or descheduled thread costs little, while each kernel
// call still streams enough rows for its prefetch to pay off: 8 chunks per
// thread (16-40 rows) decoded SmolLM2-shape Q8_0 at 73 t/s, 2 per thread
// (at least 64 rows) at 97 t/s; with one core kept busy by another process
// they kept 64% and 54% of that. Chunks stay at most maxChunkRows high, and
// their count is a multiple of the thread count, so that all threads finish
// together: Qwen2.5-0.5B's 4864-row FFN matrices used to be cut into 4 chunks
// of 1024 rows and one of 768, one thread streamed 2816 rows while the other
// streamed 2048 and then waited.
func (rt *compute) rowsPerChunk(rows int) int {
	if rt.threads == 1 {
		return rows
	}
	chunks := rt.threads * 2
	if rows > chunks*maxChunkRows {
		perThread := (rows + rt.threads*maxChunkRows - 1) / (rt.threads * maxChunkRows)
		chunks = rt.threads * perThread
	}
	r := (rows + chunks - 1) / chunks
	r = (r + kernels.PackRows - 1) &^ (kernels.PackRows - 1) // packed weights start chunks at group boundaries
	return min(max(r, 64), maxChunkRows)
}

// maxChunkRows bounds a chunk's height (the output projection has up to
// 150k rows).
const maxChunkRows = 1024

func (rt *compute) setTask(i int, w *weight, in []float32, inQ []byte, out []float32, ldo int, bias *weight) {
	t := &rt.tasks[i]
	t.w, t.in, t.inQ, t.out, t.ldo = w, in, inQ, out, ldo
	t.prep = nil
	if w.packed {
		if !rt.prep.Holds(inQ) {
			panic("engine: a packed weight's input was not prepared by quantizeRows")
		}
		t.prep = &rt.prep
	}
	t.bias = nil
	if bias != nil {
		t.bias = bias.f32
	}
	t.rpc = rt.rowsPerChunk(w.rows)
	t.chunks = (w.rows + t.rpc - 1) / t.rpc
}

// runMats runs rt.tasks[:nTasks] in one parallel job.
func (rt *compute) runMats(op, nTasks int) {
	rt.nTasks = nTasks
	total := 0
	for i := 0; i < nTasks; i++ {
		total += rt.tasks[i].chunks
	}
	rt.pool.run(op, total)
}

// quantizeRows fills rt.xq with n rows of cols floats from src when w needs it.
func (rt *compute) quantizeRows(src []float32, cols, n int, ws ...*weight) []byte {
	need := false
	for _, w := range ws {
		need = need || w.needsQ8()
	}
	if !need {
		return nil
	}
	rb := cols / 32 * kernels.BlockQ8_0 // whole blocks: the n rows quantize as one run
	kernels.QuantizeQ8_0(rt.xq[:n*rb], src[:n*cols])
	rt.prep.Reset()
	packed, q8 := false, false
	for _, w := range ws {
		packed = packed || w.packed
		q8 = q8 || (w.packed && w.typ == gguf.TypeQ8_0)
	}
	if packed {
		rt.prep.Prepare(rt.xq[:n*rb], n, cols, q8) // once for every chunk and thread
	}
	return rt.xq[:n*rb]
}

// forwardBatch runs one batch of at most maxBatch rows: tokens[i] is row i,
// segs partitions the rows into sequences (in row order, each with room in
// its cache). The logits of rows outRows go to out ([len(outRows)][vocab]).
func (rt *compute) forwardBatch(ctx context.Context, tokens []int32, segs []segment, outRows []int32, out []float32) error {
	hp := rt.hp
	m := rt.m
	n := len(tokens)
	dim, qDim, kvDim, ffn := hp.dim, hp.qDim(), hp.kvDim(), hp.ffn
	rt.n = n
	rt.pool.setHot(true) // the pass's jobs follow each other within microseconds
	defer rt.pool.setHot(false)
	rt.segs = segs // read only, until the pass returns
	for si := range rt.segs {
		sg := &rt.segs[si]
		if sg.pos0+sg.n > sg.kv.max {
			return ErrContextFull
		}
		sg.kv.reserve(sg.pos0 + sg.n)
		for j := sg.start; j < sg.start+sg.n; j++ {
			rt.rowSeg[j] = int32(si)
		}
	}

	for j, id := range tokens {
		embedRow(rt.x[j*dim:(j+1)*dim], m.tokEmbd, int(id))
	}
	if hp.embScale != 0 {
		for i := range rt.x[:n*dim] {
			rt.x[i] *= hp.embScale
		}
	}
	half := hp.ropeDims / 2
	for j := 0; j < n; j++ {
		sg := &rt.segs[rt.rowSeg[j]]
		p := float64(sg.pos0 + j - sg.start)
		for i, f := range rt.invFreq {
			s, c := math.Sincos(p * f)
			rt.cos[j*half+i], rt.sin[j*half+i] = float32(c), float32(s)
		}
		for i, f := range rt.invFreqSWA {
			s, c := math.Sincos(p * f)
			rt.cosSWA[j*half+i], rt.sinSWA[j*half+i] = float32(c), float32(s)
		}
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	x, xb := rt.x[:n*dim], rt.xb[:n*dim]
	// A batch of one-row sequences (continuous batching's decode steps)
	// prepares each row's heads inside the attention job; rows of one
	// sequence read each other's keys, so other batches store them all
	// first.
	rt.prepInAttn = len(segs) == n
	for l := range m.layers {
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		lw := &m.layers[l]
		rt.layer = l

		// Attention.
		rmsNormRows(xb, x, lw.attnNorm.f32, dim, n, hp.rmsEps)
		xq := rt.quantizeRows(xb, dim, n, lw.wq, lw.wk, lw.wv)
		rt.setTask(0, lw.wq, xb, xq, rt.q, qDim, lw.bq)
		rt.setTask(1, lw.wk, xb, xq, rt.k, kvDim, lw.bk)
		rt.setTask(2, lw.wv, xb, xq, rt.v, hp.vDim(), lw.bv)
		rt.runMats(opMat, 3)
		if !rt.prepInAttn {
			for j := 0; j < n; j++ {
				for g := 0; g < hp.kvHeads; g++ {
					rt.prepHeads(j, g)
				}
			}
		}
		rt.pool.run(opAttn, n*hp.kvHeads)
		aq := rt.quantizeRows(rt.att, qDim, n, lw.wo)
		rt.setTask(0, lw.wo, rt.att, aq, xb, dim, nil)
		rt.runMats(opMat, 1)
		if lw.attnPostNorm != nil && hp.postNorms {
			rmsNormRows(xb, xb, lw.attnPostNorm.f32, dim, n, hp.rmsEps)
		}
		addInto(x, xb)

		// Feed-forward.
		rmsNormRows(xb, x, lw.ffnNorm.f32, dim, n, hp.rmsEps)
		xq = rt.quantizeRows(xb, dim, n, lw.wGate, lw.wUp)
		rt.setTask(0, lw.wGate, xb, xq, rt.gate, ffn, nil)
		rt.setTask(1, lw.wUp, xb, xq, rt.up, ffn, nil)
		rt.nTasks = 2
		rt.pool.run(opFFN, rt.tasks[0].chunks)
		gq := rt.quantizeRows(rt.gate, ffn, n, lw.wDown)
		rt.setTask(0, lw.wDown, rt.gate, gq, xb, dim, nil)
		rt.runMats(opMat, 1)
		if lw.ffnPostNorm != nil && hp.postNorms {
			rmsNormRows(xb, xb, lw.ffnPostNorm.f32, dim, n, hp.rmsEps)
		}
		addInto(x, xb)
	}

	if len(outRows) == 0 {
		return nil
	}
	// Normalise just the rows whose logits are wanted, packed together.
	for i, r := range outRows {
		kernels.RMSNorm(xb[i*dim:(i+1)*dim], x[int(r)*dim:(int(r)+1)*dim], m.outputNorm.f32, hp.rmsEps)
	}
	k := len(outRows)
	xq := rt.quantizeRows(xb, dim, k, m.output)
	rt.n = k
	rt.setTask(0, m.output, xb, xq, out, hp.vocab, nil)
	rt.runMats(opMat, 1)
	if hp.softcap != 0 {
		softcapLogits(out[:k*hp.vocab], hp.softcap)
	}
	return nil
}

// runChunk implements chunkRunner.
func (rt *compute) runChunk(op, chunk, worker int) {
	switch op {
	case opMat:
		for i := 0; i < rt.nTasks; i++ {
			t := &rt.tasks[i]
			if chunk < t.chunks {
				r0 := chunk * t.rpc
				rt.matRows(t, r0, min(r0+t.rpc, t.w.rows))
				return
			}
			chunk -= t.chunks
		}
	case opFFN:
		g, u := &rt.tasks[0], &rt.tasks[1]
		r0 := chunk * g.rpc
		r1 := min(r0+g.rpc, g.w.rows)
		rt.matRows(g, r0, r1)
		rt.matRows(u, r0, r1)
		if rt.hp.gelu {
			gegluRows(g.out[r0:], u.out[r0:], g.ldo, rt.n, r1-r0)
		} else {
			kernels.SwiGLURows(g.out[r0:], u.out[r0:], g.ldo, rt.n, r1-r0)
		}
	case opAttn:
		j, g := chunk/rt.hp.kvHeads, chunk%rt.hp.kvHeads
		if rt.prepInAttn {
			rt.prepHeads(j, g)
		}
		rt.attend(j, g, worker)
	case opRead:
		c := &rt.reads[chunk]
		sink.Add(kernels.ReadStream(c.a) ^ kernels.ReadStream(c.b))
	}
}

// matRows computes rows [r0, r1) of t for all rt.n input rows.
func (rt *compute) matRows(t *matTask, r0, r1 int) {
	w, n, cols := t.w, rt.n, t.w.cols
	if rowQuant := rowQuantKernel(w.typ); rowQuant != nil {
		rowQuant(t.out, t.ldo, w.raw, cols, r0, r1, t.inQ, n)
	} else if w.packed && w.typ == gguf.TypeQ4_0 {
		kernels.MatMulPackedQ4_0Prepared(t.out, t.ldo, w.raw, r0, r1, t.prep)
	} else if w.packed {
		kernels.MatMulPackedQ8_0Prepared(t.out, t.ldo, w.raw, r0, r1, t.prep)
	} else if n == 1 {
		out := t.out[r0:r1]
		switch w.typ {
		case gguf.TypeF32:
			kernels.MatVecF32(out, w.f32, cols, r0, r1, t.in[:cols])
		case gguf.TypeF16:
			kernels.MatVecF16(out, w.raw, cols, r0, r1, t.in[:cols])
		case gguf.TypeQ8_0:
			kernels.MatVecQ8_0(out, w.raw, cols, r0, r1, t.inQ)
		case gguf.TypeQ4_0:
			kernels.MatVecQ4_0(out, w.raw, cols, r0, r1, t.inQ)
		}
	} else {
		switch w.typ {
		case gguf.TypeF32:
			kernels.MatMulF32(t.out, t.ldo, w.f32, cols, r0, r1, t.in[:n*cols], n)
		case gguf.TypeF16:
			kernels.MatMulF16(t.out, t.ldo, w.raw, cols, r0, r1, t.in[:n*cols], n)
		case gguf.TypeQ8_0:
			kernels.MatMulQ8_0(t.out, t.ldo, w.raw, cols, r0, r1, t.inQ, n)
		case gguf.TypeQ4_0:
			kernels.MatMulQ4_0(t.out, t.ldo, w.raw, cols, r0, r1, t.inQ, n)
		}
	}
	if t.bias != nil {
		b := t.bias[r0:r1]
		for j := 0; j < n; j++ {
			addInto(t.out[j*t.ldo+r0:j*t.ldo+r1], b)
		}
	}
}

// prepHeads finishes batch row j's query heads of KV group g and its key
// head g (norms where the model has them, RoPE) and stores the row's key
// and value for head g in its sequence's cache.
func (rt *compute) prepHeads(j, g int) {
	hp, lw := rt.hp, &rt.m.layers[rt.layer]
	hd, qDim, kvDim, grp := hp.headDim, hp.qDim(), hp.kvDim(), hp.heads/hp.kvHeads
	half := hp.ropeDims / 2
	cos, sin := rt.cos[j*half:(j+1)*half], rt.sin[j*half:(j+1)*half]
	if hp.swa != nil && hp.swa[rt.layer] {
		cos, sin = rt.cosSWA[j*half:(j+1)*half], rt.sinSWA[j*half:(j+1)*half]
	}
	qg := rt.q[j*qDim+g*grp*hd : j*qDim+(g+1)*grp*hd]
	kg := rt.k[j*kvDim+g*hd : j*kvDim+(g+1)*hd]
	if hp.qkNorm {
		for h := 0; h < grp; h++ {
			kernels.RMSNorm(qg[h*hd:(h+1)*hd], qg[h*hd:(h+1)*hd], lw.qNorm.f32, hp.rmsEps)
		}
		kernels.RMSNorm(kg, kg, lw.kNorm.f32, hp.rmsEps)
	}
	if hp.noRopeStep == 0 || (rt.layer+1)%hp.noRopeStep != 0 {
		kernels.Rope(qg, grp, hd, cos, sin, hp.rope == ropeNorm)
		kernels.Rope(kg, 1, hd, cos, sin, hp.rope == ropeNorm)
	}
	sg := &rt.segs[rt.rowSeg[j]]
	sg.kv.store(rt.layer, g, sg.pos0+j-sg.start, kg, rt.v[j*kvDim+g*hd:j*kvDim+(g+1)*hd])
}

// attend computes softmax(q·Kᵀ/√d + causal mask)·V for batch row j and
// the query heads sharing KV head g (adjacent in q), against the row's own
// sequence: one chunk of the parallel attention job. Each row is computed
// alone with the same operations whatever the batch holds, so prompts,
// speculative verification and batched decoding give the very bits that
// one-token decoding gives; the heads of a group read their keys and values
// once.
func (rt *compute) attend(j, g, worker int) {
	hp, probs := rt.hp, rt.scratch[worker]
	sg := &rt.segs[rt.rowSeg[j]]
	kv := sg.kv
	hd, grp := hp.headDim, hp.heads/hp.kvHeads
	npos := sg.pos0 + j - sg.start + 1 // causal: the row sees positions [0, npos)
	off := j*hp.qDim() + g*grp*hd
	out, q := rt.att[off:off+grp*hd], rt.q[off:off+grp*hd]
	if start := hp.windowStart(rt.layer, npos); start > 0 {
		// A sliding-window layer past its window: a window starting on a
		// key block is the kernels' attention over the cache from there.
		rt.attendWindow(out, q, kv, g, start, npos, worker, probs)
		return
	}
	if kv.half {
		kernels.AttendF16(out, q, kvHead(kv, kv.k16[rt.layer], g), kvHead(kv, kv.v16[rt.layer], g), hd, npos, grp, rt.attScale, probs)
		return
	}
	kernels.Attend(out, q, kvHead(kv, kv.k[rt.layer], g), kvHead(kv, kv.v[rt.layer], g), hd, npos, grp, rt.attScale, probs)
}

// embedRow writes row id of the embedding table as float32.
func embedRow(dst []float32, w *weight, id int) {
	switch w.typ {
	case gguf.TypeF32:
		copy(dst, w.f32[id*w.cols:(id+1)*w.cols])
	default:
		if w.packed && w.typ == gguf.TypeQ4_0 {
			kernels.DequantizePackedQ4_0Row(dst, w.raw, w.cols, id)
			return
		}
		if w.packed {
			kernels.DequantizePackedQ8_0Row(dst, w.raw, w.cols, id)
			return
		}
		rb := w.rowBytes()
		src := w.raw[id*rb : (id+1)*rb]
		switch w.typ {
		case gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ5_0, gguf.TypeQ5_1:
			_ = quant.Dequantize(dst, src, w.typ) // sizes checked at load
		case gguf.TypeF16:
			kernels.DequantizeF16(dst, src)
		case gguf.TypeQ8_0:
			kernels.DequantizeQ8_0(dst, src)
		case gguf.TypeQ4_0:
			kernels.DequantizeQ4_0(dst, src)
		}
	}
}

func rmsNormRows(dst, src, w []float32, dim, n int, eps float32) {
	for j := 0; j < n; j++ {
		kernels.RMSNorm(dst[j*dim:(j+1)*dim], src[j*dim:(j+1)*dim], w, eps)
	}
}

func addInto(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
