package engine

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of what the scheduler is doing, for gauges: it is
// read without waiting for the scheduler (each field is current to within
// one step).
type Stats struct {
	// Batch is how many generations (answers and early-start prefills)
	// the last forward pass carried.
	Batch int
	// Queued is how many requests wait for the scheduler to admit them.
	Queued int
	// KVBytes is the memory held by the kept conversations' KV caches.
	KVBytes int64
	// Spec counts speculative decoding since the engine opened.
	Spec SpecStats
}

// gauges is what Stats reads; the scheduler writes it.
type gauges struct {
	batch                     atomic.Int64
	kvBytes                   atomic.Int64
	rounds, drafted, accepted atomic.Int64
}

// Stats returns the scheduler's current figures. It is cheap and safe
// for concurrent use (a metrics scrape calls it).
func (e *Engine) Stats() Stats {
	g := &e.gauges
	return Stats{
		Batch:   int(g.batch.Load()),
		Queued:  len(e.queue),
		KVBytes: g.kvBytes.Load(),
		Spec: SpecStats{
			Rounds:   int(g.rounds.Load()),
			Drafted:  int(g.drafted.Load()),
			Accepted: int(g.accepted.Load()),
		},
	}
}

// noteStep publishes the scheduler's figures after a step; it runs on the
// scheduler goroutine.
func (e *Engine) noteStep(batch int) {
	g := &e.gauges
	g.batch.Store(int64(batch))
	if e.spec != nil {
		s := e.spec.stats
		g.rounds.Store(int64(s.Rounds))
		g.drafted.Store(int64(s.Drafted))
		g.accepted.Store(int64(s.Accepted))
	}
}

// noteKV publishes the kept conversations' KV bytes (scheduler goroutine).
func (e *Engine) noteKV() {
	var total int64
	for _, c := range e.convs {
		total += c.kv.bytes()
	}
	e.gauges.kvBytes.Store(total)
}

// ttft splits a request's time to first token: queue is enqueue → the
// scheduler admitting it, compute is admission → the first token (its
// prompt's passes, shared with the other generations of the batch).
func (r *request) ttft() (queue, compute time.Duration) {
	if r.admitted.IsZero() {
		return 0, 0
	}
	queue = r.admitted.Sub(r.enqueued)
	if !r.firstToken.IsZero() {
		compute = r.firstToken.Sub(r.admitted)
	}
	return queue, compute
}
