package knowledge

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// Searcher finds passages for a question (Index, Base).
type Searcher interface {
	Search(ctx context.Context, question string, topK int, minScore float64) ([]Passage, error)
}

// Options of Wrap.
type Options struct {
	TopK             int     // passages at most (default 2)
	MinScore         float64 // reranked score a passage needs (default 7: headword matches)
	MaxContextTokens int     // the passage block's budget (0: no limit)
	// CountTokens counts tokens as the model does (engine: Tokenizer().Encode);
	// nil leaves MaxContextTokens unenforced.
	CountTokens func(string) int
	// OnError hears lookup failures; the request then goes without context.
	OnError func(error)
}

// Defaults of Options.
const (
	DefaultTopK     = 2
	DefaultMinScore = 7
	cacheSize       = 256
)

// Wrap returns a model that looks up the last user message of each request
// in s and puts the passages found before it (Augment); the caller's
// messages are never modified. The result implements llm.Prefiller when m
// does, so early start prefills the augmented prompt. The last lookups are
// cached by text, so a final transcript equal to the prefilled partial costs
// no second lookup. Each request reports to llm.Observe.
func Wrap(m llm.Model, s Searcher, o Options) llm.Model {
	if o.TopK <= 0 {
		o.TopK = DefaultTopK
	}
	w := &wrapped{inner: m, s: s, o: o, cache: map[string]*lookup{}}
	if p, ok := m.(llm.Prefiller); ok {
		return &wrappedPrefiller{wrapped: w, p: p}
	}
	return w
}

type lookup struct {
	block    string
	passages int
	tokens   int
}

type wrapped struct {
	inner llm.Model
	s     Searcher
	o     Options

	mu    sync.Mutex
	cache map[string]*lookup
	order []string // insertion order, oldest first
}

type wrappedPrefiller struct {
	*wrapped
	p llm.Prefiller
}

func (w *wrapped) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	return w.inner.Stream(ctx, w.augment(ctx, req))
}

func (w *wrappedPrefiller) Prefill(ctx context.Context, req llm.Request) (int, error) {
	return w.p.Prefill(ctx, w.augment(ctx, req))
}

// augment returns req with its last user message augmented, on a copy of
// the message slice.
func (w *wrapped) augment(ctx context.Context, req llm.Request) llm.Request {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != llm.RoleUser {
		return req
	}
	q := req.Messages[n-1].Content
	if Augmented(q) {
		// Augmented upstream already: another voxpipe using this one's /v1
		// as its remote LLM looked it up itself. A second block would
		// look up the first one's words.
		return req
	}
	start := time.Now()
	lk, cached, err := w.lookup(ctx, q)
	if err != nil {
		if !errors.Is(err, ErrNotReady) && ctx.Err() == nil && w.o.OnError != nil {
			w.o.OnError(err)
		}
		return req
	}
	a := llm.Augmentation{Passages: lk.passages, Tokens: lk.tokens, Cached: cached}
	if !cached {
		a.Lookup = time.Since(start)
	}
	llm.Observe(ctx, a)
	if lk.passages == 0 {
		return req
	}
	msgs := make([]llm.Message, n)
	copy(msgs, req.Messages)
	msgs[n-1].Content = lk.block + templateQuestion + q
	req.Messages = msgs
	return req
}

func (w *wrapped) lookup(ctx context.Context, q string) (*lookup, bool, error) {
	w.mu.Lock()
	lk := w.cache[q]
	w.mu.Unlock()
	if lk != nil {
		return lk, true, nil
	}
	ps, err := w.s.Search(ctx, q, w.o.TopK, w.o.MinScore)
	if err != nil {
		return nil, false, err
	}
	ps = Fit(ps, w.o.MaxContextTokens, w.o.CountTokens)
	lk = &lookup{block: Block(ps), passages: len(ps)}
	if lk.passages > 0 && w.o.CountTokens != nil {
		lk.tokens = w.o.CountTokens(lk.block)
	}
	w.mu.Lock()
	if _, ok := w.cache[q]; !ok {
		w.cache[q] = lk
		w.order = append(w.order, q)
		if len(w.order) > cacheSize {
			delete(w.cache, w.order[0])
			w.order = w.order[1:]
		}
	}
	w.mu.Unlock()
	return lk, false, nil
}
