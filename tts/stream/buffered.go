package stream

import (
	"context"
	"errors"
	"sync"

	"github.com/voxpipe/voxpipe/tts"
)

// Buffered runs one synthesis for an engine that holds a process-wide lock
// while it synthesizes. produce runs on the calling goroutine, takes the
// lock and writes every engine callback into w; w's sink only queues, so
// produce never waits on the consumer. A goroutine of Buffered's own sends
// the queued chunks to out as they come, so audio streams while the engine
// runs, and a consumer that stops reading delays only this call: the lock
// is released once the engine is done, and the rest is delivered after.
//
// produce should stop when ctx ends; it may stop early by returning an
// error: w.Write returns ctx.Err() once ctx has ended. Buffered returns
// when produce has returned and every chunk is delivered (nil), with
// produce's error (what was not yet delivered is dropped), or with
// ctx.Err() when ctx ends first.
func Buffered(ctx context.Context, out chan<- tts.Chunk, cfg Config, produce func(w *Writer) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := &queue{ready: make(chan struct{}, 1)}
	w := NewWriter(cfg, func(c tts.Chunk) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.push(c)
		return nil
	})
	sent := make(chan error, 1)
	go func() { sent <- q.forward(ctx, out) }()

	err := produce(w)
	if err == nil {
		err = w.Close()
	}
	q.close()
	if err != nil {
		cancel()
		// The forwarder stops on the cancel (context.Canceled) or has
		// delivered everything (nil): produce's error is the one to report.
		if ferr := <-sent; ferr != nil && !errors.Is(ferr, context.Canceled) {
			return errors.Join(err, ferr)
		}
		return err
	}
	return <-sent
}

// queue hands chunks from the engine's goroutine to the forwarder without
// ever blocking the engine.
type queue struct {
	ready chan struct{} // one wake-up pending at most

	mu     sync.Mutex // guards the fields below
	items  []tts.Chunk
	closed bool
}

func (q *queue) push(c tts.Chunk) {
	q.mu.Lock()
	q.items = append(q.items, c)
	q.mu.Unlock()
	q.wake()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *queue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// forward sends every queued chunk to out, in order, until the queue is
// closed and empty (nil) or ctx ends (ctx.Err()).
func (q *queue) forward(ctx context.Context, out chan<- tts.Chunk) error {
	var batch []tts.Chunk
	for {
		q.mu.Lock()
		batch, q.items = q.items, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i, c := range batch {
			select {
			case out <- c:
				batch[i] = tts.Chunk{} // ownership passed
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return nil
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
