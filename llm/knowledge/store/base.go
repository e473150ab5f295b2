package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

// Base opens (building if needed) an index in the background, so a server
// starts at once and answers without context until the index is ready.
type Base struct {
	ix     atomic.Pointer[Index]
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// Start begins opening the index of sources (Open) in the background.
// onReady, if set, is called once with the result.
func Start(sources []string, cacheDir string, progress Progress, onReady func(*Index, error)) *Base {
	ctx, cancel := context.WithCancel(context.Background())
	b := &Base{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		ix, err := Open(ctx, sources, cacheDir, progress)
		if err != nil {
			b.mu.Lock()
			b.err = err
			b.mu.Unlock()
		} else {
			b.ix.Store(ix)
		}
		if onReady != nil {
			onReady(ix, err)
		}
	}()
	return b
}

// Search looks question up once the index is ready; before that, or when
// opening failed, it returns knowledge.ErrNotReady (joined with the failure).
func (b *Base) Search(ctx context.Context, question string, topK int, minScore float64) ([]knowledge.Passage, error) {
	ix := b.ix.Load()
	if ix == nil {
		b.mu.Lock()
		err := b.err
		b.mu.Unlock()
		return nil, errors.Join(knowledge.ErrNotReady, err)
	}
	return ix.Search(ctx, question, topK, minScore)
}

// Wait blocks until the index is open (or failed, or ctx ends).
func (b *Base) Wait(ctx context.Context) (*Index, error) {
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ix.Load(), b.err
}

// Close stops a build in progress (its temporary folder is removed) and
// closes the index.
func (b *Base) Close() error {
	b.cancel()
	<-b.done
	if ix := b.ix.Load(); ix != nil {
		return ix.Close()
	}
	return nil
}
