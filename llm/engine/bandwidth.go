package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/voxpipe/voxpipe/cgo/kernels"
)

// Bandwidth is what BenchBandwidth measured: how fast the engine's own
// threads can read the weights one decode step reads, with nothing else to
// do. A decode step cannot read them faster, so decode tokens/s ×
// DecodeBytes / BytesPerSecond is the fraction of the memory limit the
// engine reaches.
type Bandwidth struct {
	DecodeBytes    int64 // weight bytes one decode step reads
	ReadBytes      int64 // bytes one probe pass reads (DecodeBytes less the one embedding row of an untied model)
	Threads        int
	BytesPerSecond float64 // best of the passes
	Passes         int
}

// sink keeps ReadStream's results alive so the reads cannot be dropped.
var sink atomic.Uint64

// DecodeBytes is the number of weight bytes one decode step reads: every
// matrix and norm, with the token embedding counted as one row unless the
// output projection shares it.
func (e *Engine) DecodeBytes() int64 {
	m := e.model
	var n int64
	for _, w := range m.weights() {
		if w == m.tokEmbd && m.output != m.tokEmbd {
			n += int64(len(w.raw) / w.rows)
			continue
		}
		n += int64(len(w.raw))
	}
	return n
}

// BenchBandwidth is the bandwidth probe: a plain streaming read (ReadStream,
// no arithmetic) of the weights themselves, passes times, best pass. Each
// pass is one job on the engine's worker pool, so it runs on the threads
// that decode, with the decode's chunks: every matrix cut into the row
// ranges one decode step's jobs cut it into (rowsPerChunk; a feed-forward
// chunk is its gate rows and then its up rows), in the order a step reads
// them, claimed by whichever thread is free. Unlike a step it has no
// barrier between matrices and no work between them, so it is the read
// limit for that access pattern, never below it. It runs on the scheduler
// goroutine, so nothing else the engine does competes with it.
//
// Before, the probe read a separate buffer of DecodeBytes in one contiguous
// part per thread on fresh goroutines: other memory (its own pages, faulted
// in just before), other threads than the pool's, and a pattern no step
// has.
func (e *Engine) BenchBandwidth(ctx context.Context, passes int) (Bandwidth, error) {
	res := Bandwidth{DecodeBytes: e.DecodeBytes(), Threads: e.cfg.Threads}
	job := func() {
		rt := e.rt
		rt.reads = rt.decodeReads(rt.reads[:0])
		for _, c := range rt.reads {
			res.ReadBytes += int64(len(c.a) + len(c.b))
		}
		for p := 0; p < passes && ctx.Err() == nil; p++ {
			start := time.Now()
			rt.pool.run(opRead, len(rt.reads))
			res.Passes++
			if bps := float64(res.ReadBytes) / time.Since(start).Seconds(); bps > res.BytesPerSecond {
				res.BytesPerSecond = bps
			}
		}
	}
	if err := e.runOnScheduler(ctx, job); err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// readChunk is one chunk of the bandwidth probe: the weight bytes one chunk
// of a decode step's job streams (a feed-forward chunk reads two ranges).
type readChunk struct{ a, b []byte }

// decodeReads appends the chunks of one decode step's weight reads to dst,
// in the order forwardBatch's jobs read them, cut as setTask cuts them.
func (rt *compute) decodeReads(dst []readChunk) []readChunk {
	m := rt.m
	whole := func(w *weight) {
		if w != nil {
			dst = append(dst, readChunk{a: w.raw})
		}
	}
	mat := func(ws ...*weight) {
		for _, w := range ws {
			rpc := rt.rowsPerChunk(w.rows)
			for r0 := 0; r0 < w.rows; r0 += rpc {
				dst = append(dst, readChunk{a: w.rowSpan(r0, min(r0+rpc, w.rows))})
			}
		}
	}
	for i := range m.layers {
		l := &m.layers[i]
		whole(l.attnNorm)
		whole(l.qNorm)
		whole(l.kNorm)
		mat(l.wq, l.wk, l.wv)
		whole(l.bq)
		whole(l.bk)
		whole(l.bv)
		mat(l.wo)
		whole(l.ffnNorm)
		rpc := rt.rowsPerChunk(l.wGate.rows)
		for r0 := 0; r0 < l.wGate.rows; r0 += rpc {
			r1 := min(r0+rpc, l.wGate.rows)
			dst = append(dst, readChunk{a: l.wGate.rowSpan(r0, r1), b: l.wUp.rowSpan(r0, r1)})
		}
		mat(l.wDown)
	}
	whole(m.outputNorm)
	mat(m.output)
	return dst
}

// rowSpan is the part of w.raw that a product over rows [r0, r1) reads:
// whole 16-row groups of a packed matrix (a last group's padding rows
// included), the rows themselves otherwise.
func (w *weight) rowSpan(r0, r1 int) []byte {
	stored := w.rows
	if w.packed {
		stored = (w.rows + kernels.PackRows - 1) / kernels.PackRows * kernels.PackRows
		r1 = min((r1+kernels.PackRows-1)/kernels.PackRows*kernels.PackRows, stored)
	}
	rb := len(w.raw) / stored
	return w.raw[r0*rb : r1*rb]
}
