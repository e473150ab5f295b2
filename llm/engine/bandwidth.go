package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voxpipe/voxpipe/cgo/kernels"
)

// Bandwidth is what BenchBandwidth measured: the machine's plain streaming
// read speed over a buffer the size of the weights one decode step reads,
// with the engine's thread count. A decode step cannot read its weights
// faster, so decode tokens/s × DecodeBytes / BytesPerSecond is the fraction
// of the memory limit the engine reaches.
type Bandwidth struct {
	DecodeBytes    int64 // weight bytes one decode step reads
	Threads        int
	BytesPerSecond float64 // best of the passes
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

// BenchBandwidth streams a buffer of DecodeBytes through Threads goroutines
// (each reads its own contiguous part, as the row chunks do) passes times and
// reports the best pass. It runs on the scheduler goroutine, so nothing else
// the engine does competes with it.
func (e *Engine) BenchBandwidth(ctx context.Context, passes int) (Bandwidth, error) {
	res := Bandwidth{DecodeBytes: e.DecodeBytes(), Threads: e.cfg.Threads}
	size := int(res.DecodeBytes+127) &^ 127
	buf, release, err := allocArena(size)
	if err != nil {
		return res, err
	}
	defer func() { _ = release() }()
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i >> 12) // fault every page in before timing
	}
	threads := max(1, e.cfg.Threads)
	part := (size/threads + 127) &^ 127
	job := func() {
		var wg sync.WaitGroup
		for p := 0; p < passes && ctx.Err() == nil; p++ {
			start := time.Now()
			for t := 0; t < threads; t++ {
				lo, hi := min(t*part, size), min((t+1)*part, size)
				wg.Add(1)
				go func() {
					defer wg.Done()
					sink.Add(kernels.ReadStream(buf[lo:hi]))
				}()
			}
			wg.Wait()
			if bps := float64(size) / time.Since(start).Seconds(); bps > res.BytesPerSecond {
				res.BytesPerSecond = bps
			}
		}
	}
	if err := e.runOnScheduler(ctx, job); err != nil {
		return res, err
	}
	return res, ctx.Err()
}
