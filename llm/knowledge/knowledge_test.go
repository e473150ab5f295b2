package knowledge

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

func TestTemplate(t *testing.T) {
	ps := []Passage{{Title: "volcano", Text: "a fissure in the earth's crust"}, {Title: "lava", Text: "rock in a molten state"}}
	want := "Facts that may help:\nvolcano: a fissure in the earth's crust\nlava: rock in a molten state\n\nQuestion: what is a volcano"
	if got := Augment("what is a volcano", ps); got != want {
		t.Fatalf("Augment:\n%q\nwant\n%q", got, want)
	}
	if got := Augment("hello", nil); got != "hello" {
		t.Fatalf("no passages: got %q", got)
	}
}

// fakeModel records requests; it prefills when prefill is set.
type fakeModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *fakeModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	ch := make(chan llm.Token, 1)
	ch <- llm.Token{Done: true, Usage: &llm.Usage{}}
	close(ch)
	return ch, nil
}

type fakePrefiller struct{ fakeModel }

func (m *fakePrefiller) Prefill(ctx context.Context, req llm.Request) (int, error) {
	m.Stream(ctx, req)
	return 1, nil
}

type fakeSearcher struct {
	calls atomic.Int32
	ps    []Passage
	err   error
}

func (s *fakeSearcher) Search(ctx context.Context, q string, topK int, minScore float64) ([]Passage, error) {
	s.calls.Add(1)
	if s.err != nil {
		return nil, s.err
	}
	var out []Passage
	for _, p := range s.ps {
		if strings.Contains(strings.ToLower(q), p.Title) && len(out) < topK {
			out = append(out, p)
		}
	}
	return out, nil
}

func TestWrap(t *testing.T) {
	inner := &fakePrefiller{}
	s := &fakeSearcher{ps: []Passage{{Title: "volcano", Text: "a fissure in the earth's crust"}}}
	words := func(s string) int { return len(strings.Fields(s)) }
	m := Wrap(inner, s, Options{CountTokens: words})
	p, ok := m.(llm.Prefiller)
	if !ok {
		t.Fatal("Wrap dropped llm.Prefiller")
	}
	if _, ok := Wrap(&fakeModel{}, s, Options{}).(llm.Prefiller); ok {
		t.Fatal("Wrap added llm.Prefiller to a model without it")
	}
	history := []llm.Message{
		{Role: llm.RoleSystem, Content: "Be brief."},
		{Role: llm.RoleUser, Content: "what is a volcano"},
	}
	var seen []llm.Augmentation
	ctx := llm.WithObserver(context.Background(), func(a llm.Augmentation) { seen = append(seen, a) })
	if _, err := p.Prefill(ctx, llm.Request{Messages: history}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stream(ctx, llm.Request{Messages: history}); err != nil {
		t.Fatal(err)
	}
	if history[1].Content != "what is a volcano" {
		t.Fatalf("the caller's history changed: %q", history[1].Content)
	}
	want := "Facts that may help:\nvolcano: a fissure in the earth's crust\n\nQuestion: what is a volcano"
	for i, r := range inner.reqs {
		if got := r.Messages[1].Content; got != want || r.Messages[0].Content != "Be brief." {
			t.Fatalf("request %d: %q", i, got)
		}
	}
	if s.calls.Load() != 1 {
		t.Fatalf("%d lookups, want 1 (the final reuses the prefill's)", s.calls.Load())
	}
	if len(seen) != 2 || seen[0].Passages != 1 || seen[0].Tokens != words(Block(s.ps)) || seen[0].Cached || !seen[1].Cached {
		t.Fatalf("observed %+v", seen)
	}
	// No passages, an assistant-last request, a message augmented upstream
	// (another voxpipe using this one's /v1), a failing index: the request
	// goes unchanged.
	for _, msgs := range [][]llm.Message{
		{{Role: llm.RoleUser, Content: "hello"}},
		{{Role: llm.RoleUser, Content: "volcano"}, {Role: llm.RoleAssistant, Content: "A volcano is"}},
		{{Role: llm.RoleUser, Content: want}},
	} {
		inner.reqs = nil
		m.Stream(context.Background(), llm.Request{Messages: msgs})
		if got := inner.reqs[0].Messages; !reflect.DeepEqual(got[len(got)-1], msgs[len(msgs)-1]) {
			t.Fatalf("changed: %+v", got)
		}
	}
	var failed error
	bad := Wrap(&fakeModel{}, &fakeSearcher{err: errors.New("disk gone")}, Options{OnError: func(err error) { failed = err }})
	if _, err := bad.Stream(context.Background(), llm.Request{Messages: history}); err != nil || failed == nil {
		t.Fatalf("a failed lookup: stream err %v, reported %v", err, failed)
	}
	notReady := Wrap(&fakeModel{}, &fakeSearcher{err: ErrNotReady}, Options{OnError: func(err error) { t.Fatalf("reported %v", err) }})
	notReady.Stream(context.Background(), llm.Request{Messages: history})
}

func TestFit(t *testing.T) {
	words := func(s string) int { return len(strings.Fields(s)) }
	ps := []Passage{{Title: "a", Text: "one two three four five six"}, {Title: "b", Text: "seven eight"}}
	// Block: "Facts that may help:" (4) + "a: one ... six" (7) + "b: seven eight" (3).
	if got := Fit(ps, 14, words); len(got) != 2 {
		t.Fatalf("budget 14: %+v", got)
	}
	if got := Fit(ps, 13, words); len(got) != 1 || got[0].Text != ps[0].Text {
		t.Fatalf("budget 13: %+v", got)
	}
	if got := Fit(ps, 8, words); len(got) != 1 || got[0].Text != "one two three" {
		t.Fatalf("budget 8: %+v, want the first passage cut to fit", got)
	}
	if got := Fit(ps, 4, words); len(got) != 0 {
		t.Fatalf("budget 4: %+v", got)
	}
	if got := Fit(ps, 0, words); len(got) != 2 {
		t.Fatal("budget 0 is no limit")
	}
}
