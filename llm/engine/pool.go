package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// spinWait bounds how long an idle worker (or the caller waiting for the
// last chunk) polls before blocking. Decoding runs ~5 short jobs per layer
// with gaps of a few to a few tens of microseconds between them (the gaps
// grow with the rows of a batch: norms, RoPE, cache writes); a channel
// wake-up costs a futex call and an OS reschedule each time, a poll catches
// the next job or completion first. 30 µs against 5 µs: demo model steps
// of 1 row 0.85-0.93 vs 1.05-1.15 ms, of 5 rows 1.45-1.65 vs 1.87-2.00 ms
// (BenchmarkDemoStepCost, interleaved runs); with one of the two cores kept
// busy by another process decoding kept 50-67% of its speed either way.
// The bound keeps a worker whose core another process wants from burning
// more than that much time per job.
const spinWait = 30 * time.Microsecond

// hotSpinWait bounds polling inside a forward pass (pool.hot), where the
// next job follows the last within microseconds of serial work and a
// parked worker costs a futex wake-up and several context switches (about
// 40 parks per decoded token of Llama-3.2-1B at spinWait). Past spinWait a
// hot poll yields the CPU at every look (sched_yield), so another process on
// the core runs and the poller resumes when it yields or is preempted: on the
// AMD dev VM, 2 threads, 4 alternated rounds, decoding 1.08x (Qwen2.5-0.5B
// Q8_0) and 1.12x (SmolLM2-135M), prompts 1.08x and 1.32x, Llama-3.2-1B
// Q4_0 0.97x and 0.94x (noise); with the second core kept busy by another
// process 0.98-1.02x decoding, 1.02-1.10x prompts. Polling 1 ms without the
// yield had decoded at 0.67x under that contention.
const hotSpinWait = time.Millisecond

// chunkRunner executes one chunk of the current parallel operation.
// worker is in [0, threads) and indexes per-worker scratch space.
type chunkRunner interface {
	runChunk(op, chunk, worker int)
}

// The job word packs epoch (24 bits) | total chunks (20 bits) | next chunk (20 bits)
// so that a worker claims a chunk of exactly the job it saw with one CAS.
const (
	jobNextBits  = 20
	jobTotalBits = 20
	jobMaxChunks = 1<<jobNextBits - 1
	jobIdxMask   = 1<<jobNextBits - 1
)

// pool runs parallel operations on a fixed set of goroutines. Work is cut
// into chunks that the caller and the workers claim through one atomic
// counter, so a worker the OS has descheduled simply claims nothing and
// never stalls a step: the caller waits only for chunks that were actually
// claimed. Idle workers poll for at most spinWait (inside a forward pass
// hotSpinWait, yielding the CPU), then block on a channel.
type pool struct {
	threads int
	runner  chunkRunner

	job       atomic.Uint64 // epoch | total | next
	completed atomic.Int64  // chunks finished in the current job
	op        int           // operation of the current job; written before job is published
	epoch     uint64

	wake     []chan struct{} // one per worker (buffered 1)
	sleeping []atomic.Bool   // per worker: about to block (or blocked) on its wake channel
	finished chan struct{}   // buffered 1: the worker that finishes the last chunk signals the caller, if waiting
	waiting  atomic.Bool     // the caller blocks (or is about to) on finished
	quit     chan struct{}
	wg       sync.WaitGroup

	// hot is set while a forward pass runs (setHot): polls last up to
	// hotSpinWait instead of spinWait.
	hot atomic.Bool
}

func newPool(threads int, r chunkRunner) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{threads: threads, runner: r, finished: make(chan struct{}, 1), quit: make(chan struct{})}
	p.wake = make([]chan struct{}, threads-1)
	p.sleeping = make([]atomic.Bool, threads-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		p.wg.Add(1)
		go p.worker(i+1, p.wake[i])
	}
	return p
}

// close stops the workers and waits for them.
func (p *pool) close() {
	close(p.quit)
	p.wg.Wait()
}

func (p *pool) worker(id int, wake <-chan struct{}) {
	defer p.wg.Done()
	sleeping := &p.sleeping[id-1]
	for {
		for {
			if _, ok := p.claimAndRun(id); !ok {
				break
			}
		}
		if p.pollJob() {
			continue
		}
		// Announce the block before the last look at the job word; run
		// publishes the job before reading the flag, so one of the two sees
		// the other and no job is missed. A wake-up that arrives after the
		// look found work is left in the channel and costs one empty pass.
		sleeping.Store(true)
		if p.hasWork() {
			sleeping.Store(false)
			continue
		}
		select {
		case <-p.quit:
			return
		case <-wake:
		}
		sleeping.Store(false)
	}
}

// hasWork reports whether the published job has unclaimed chunks.
func (p *pool) hasWork() bool {
	v := p.job.Load()
	return v&jobIdxMask < v>>jobNextBits&(1<<jobTotalBits-1)
}

// setHot marks the start (true) and end (false) of a forward pass.
func (p *pool) setHot(hot bool) { p.hot.Store(hot) }

// pollDone reports whether a poll that has run for d should stop and
// block; a long poll inside a pass yields the CPU on each look.
func (p *pool) pollDone(d time.Duration) bool {
	if d <= spinWait {
		return false
	}
	if !p.hot.Load() || d > hotSpinWait {
		return true
	}
	yieldCPU()
	return false
}

// pollJob polls for unclaimed chunks for at most spinWait (hotSpinWait
// inside a pass).
func (p *pool) pollJob() bool {
	var start time.Time
	for i := 0; ; i++ {
		if p.hasWork() {
			return true
		}
		if i&63 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if p.pollDone(time.Since(start)) {
				return false
			}
		}
	}
}

// claimAndRun claims one chunk of the published job and runs it. last is
// true when that chunk was the job's final one to complete.
func (p *pool) claimAndRun(worker int) (last, ok bool) {
	for {
		v := p.job.Load()
		total := v >> jobNextBits & (1<<jobTotalBits - 1)
		next := v & jobIdxMask
		if next >= total {
			return false, false
		}
		if p.job.CompareAndSwap(v, v+1) {
			p.runner.runChunk(p.op, int(next), worker)
			done := p.completed.Add(1)
			if done == int64(total) {
				if worker != 0 && p.waiting.CompareAndSwap(true, false) {
					p.finished <- struct{}{}
				}
				return true, true
			}
			return false, true
		}
	}
}

// run executes op over chunks [0, n) and returns when all have completed.
// It must only be called from one goroutine at a time (the scheduler).
// n must not exceed jobMaxChunks (callers size chunks accordingly).
func (p *pool) run(op, n int) {
	if n <= 0 {
		return
	}
	if p.threads == 1 || n == 1 {
		for c := 0; c < n; c++ {
			p.runner.runChunk(op, c, 0)
		}
		return
	}
	p.op = op
	p.completed.Store(0)
	p.epoch++
	p.job.Store(p.epoch<<(jobNextBits+jobTotalBits) | uint64(n)<<jobNextBits)
	wakeN := len(p.wake)
	if n-1 < wakeN {
		wakeN = n - 1
	}
	for i := 0; i < wakeN; i++ {
		if !p.sleeping[i].Load() {
			continue // polling: it will see the job
		}
		select {
		case p.wake[i] <- struct{}{}:
		default: // already has a pending wake-up; it will look at the current job
		}
	}
	lastMine := false
	for {
		last, ok := p.claimAndRun(0)
		if !ok {
			break
		}
		lastMine = lastMine || last
	}
	if !lastMine {
		p.waitFinished(int64(n))
	}
}

// waitFinished waits until all n chunks of the job have completed: it polls
// for at most spinWait (hotSpinWait inside a pass), then blocks until the
// last worker signals.
func (p *pool) waitFinished(n int64) {
	var start time.Time
	for i := 0; ; i++ {
		if p.completed.Load() == n {
			return
		}
		if i&63 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if p.pollDone(time.Since(start)) {
				break
			}
		}
	}
	p.waiting.Store(true)
	if p.completed.Load() == n && p.waiting.CompareAndSwap(true, false) {
		return // finished meanwhile, and no worker took the signal duty
	}
	// Either still running (the last worker will signal) or a worker
	// cleared waiting and is sending.
	<-p.finished
}
