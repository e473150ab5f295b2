package engine

import (
	"sync"
	"sync/atomic"
)

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
// claimed. Idle workers block on a channel; nothing spins.
type pool struct {
	threads int
	runner  chunkRunner

	job       atomic.Uint64 // epoch | total | next
	completed atomic.Int64  // chunks finished in the current job
	op        int           // operation of the current job; written before job is published
	epoch     uint64

	wake     []chan struct{} // one per worker (buffered 1)
	finished chan struct{}   // buffered 1: the worker that finishes the last chunk signals the caller
	quit     chan struct{}
	wg       sync.WaitGroup
}

func newPool(threads int, r chunkRunner) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{threads: threads, runner: r, finished: make(chan struct{}, 1), quit: make(chan struct{})}
	p.wake = make([]chan struct{}, threads-1)
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
	for {
		select {
		case <-p.quit:
			return
		case <-wake:
		}
		for {
			if _, ok := p.claimAndRun(id); !ok {
				break
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
				if worker != 0 {
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
		<-p.finished
	}
}
