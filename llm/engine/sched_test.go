package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// batchPrompts are conversations of different lengths, so sequences join
// and leave the batch at different steps.
func batchPrompts(n int) []llm.Request {
	words := []string{"the cat sat on the mat", "a dog ran", "hello world", "the mat is on the cat and the dog is on the mat", "cat", "world of the dog"}
	reqs := make([]llm.Request, n)
	for i := range reqs {
		reqs[i] = llm.Request{
			Messages:  []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: words[i%len(words)] + fmt.Sprint(" ", i)}},
			MaxTokens: 8 + 5*i,
		}
	}
	return reqs
}

// Answers produced while other sequences share the steps equal the ones
// each request gets alone, token for token (greedy), for every weight
// layout and architecture.
func TestBatchedAnswersMatchAlone(t *testing.T) {
	for _, c := range []struct {
		arch string
		typ  gguf.Type
	}{{"llama", gguf.TypeQ8_0}, {"qwen2", gguf.TypeF32}, {"qwen3", gguf.TypeQ8_0}, {"llama", gguf.TypeQ4_0}} {
		t.Run(fmt.Sprintf("%s-%v", c.arch, c.typ), func(t *testing.T) {
			e := openTiny(t, defaultTiny(c.arch, c.typ), func(cfg *Config) { cfg.QueueSize = 16 })
			reqs := batchPrompts(7)
			alone := make([]string, len(reqs))
			for i, r := range reqs {
				alone[i], _ = ask(t, e, r)
			}
			// Hold the scheduler so every request is queued before the first
			// step: they are admitted together and share every step.
			started, release := make(chan struct{}), make(chan struct{})
			go e.runOnScheduler(context.Background(), func() { close(started); <-release })
			<-started
			chans := make([]<-chan llm.Token, len(reqs))
			for i, r := range reqs {
				ch, err := e.Stream(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				chans[i] = ch
			}
			close(release)
			for i, ch := range chans {
				got, _ := collect(t, ch)
				if got != alone[i] {
					t.Errorf("request %d: batched %q, alone %q", i, got, alone[i])
				}
			}
		})
	}
}

// One request cancelled mid-answer leaves; the others finish unchanged.
func TestBatchedCancelOne(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	reqs := batchPrompts(3)
	for i := range reqs {
		reqs[i].MaxTokens = 40
	}
	want := make([]string, len(reqs))
	for i, r := range reqs {
		want[i], _ = ask(t, e, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	got := make([]string, len(reqs))
	for i, r := range reqs {
		c := context.Background()
		if i == 1 {
			c = ctx
		}
		ch, err := e.Stream(c, r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				<-ch // the first token: it has started
				cancel()
				for range ch {
				}
				return
			}
			got[i], _ = collect(t, ch)
		}()
	}
	wg.Wait()
	for _, i := range []int{0, 2} {
		if got[i] != want[i] {
			t.Errorf("request %d: %q with a cancelled neighbour, %q alone", i, got[i], want[i])
		}
	}
}

// A long answer in progress does not keep a new request waiting: the new
// one finishes while the long one is still decoding.
func TestNewRequestNotStarvedByLongAnswer(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	long := &request{ctx: context.Background(), req: llm.Request{Messages: hello, MaxTokens: 400}, ignoreEOG: true, timing: &seqTiming{}}
	long.out = make(chan llm.Token, 403)
	var err error
	if long.prompt, err = e.renderPrompt(hello, toolPrompt{}, 400); err != nil {
		t.Fatal(err)
	}
	if err = e.enqueue(long); err != nil {
		t.Fatal(err)
	}
	<-long.out // decoding has begun
	short, _ := ask(t, e, llm.Request{Messages: batchPrompts(4)[3].Messages, MaxTokens: 5})
	if short == "" {
		t.Error("short request got no text")
	}
	// When the short answer is complete the long one must still be going.
	if n := len(long.out); n >= 399 {
		t.Errorf("long answer had produced %d tokens before a 5-token request finished", n+1)
	}
	var done bool
	for tok := range long.out {
		done = done || tok.Done
	}
	if !done {
		t.Error("long answer did not finish")
	}
}

// The queue bounds waiting requests: beyond Sequences active and QueueSize
// queued, Stream fails fast with llm.ErrBusy, and everything admitted
// completes.
func TestBatchAdmissionBusy(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), func(c *Config) { c.Sequences = 2; c.QueueSize = 2 })
	started, release := make(chan struct{}), make(chan struct{})
	go e.runOnScheduler(context.Background(), func() { close(started); <-release })
	<-started
	var chans []<-chan llm.Token
	for i := 0; i < 2; i++ {
		ch, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 30})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		chans = append(chans, ch)
	}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 3}); !errors.Is(err, llm.ErrBusy) {
		t.Errorf("third request: got %v, want llm.ErrBusy", err)
	}
	close(release)
	for _, ch := range chans {
		collect(t, ch)
	}
	// Room again: more requests than Sequences queue up and all complete.
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		ch, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); collect(t, ch) }()
	}
	wg.Wait()
}

// Early start: a prefill of the conversation plus a partial transcript is
// reused by the final request, which then processes only what differs, and
// answers exactly as without the prefill.
func TestPrefillThenStreamReusesCache(t *testing.T) {
	spec := defaultTiny("qwen2", gguf.TypeQ8_0)
	e := openTiny(t, spec, nil)
	fresh := openTiny(t, spec, nil)
	partial := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: "the cat sat on"}}
	final := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: "the cat sat on the mat"}}
	n, err := e.Prefill(context.Background(), llm.Request{Messages: partial, Conversation: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("prefill processed nothing")
	}
	got, u := ask(t, e, llm.Request{Messages: final, Conversation: "s1", MaxTokens: 12})
	want, uf := ask(t, fresh, llm.Request{Messages: final, Conversation: "s1", MaxTokens: 12})
	if got != want {
		t.Errorf("after prefill %q, without %q", got, want)
	}
	if u.CachedTokens < n/2 || uf.CachedTokens != 0 {
		t.Errorf("cached tokens %d after prefilling %d (fresh engine: %d)", u.CachedTokens, n, uf.CachedTokens)
	}
	// Prefilling what is already cached does no work.
	if n2, err := e.Prefill(context.Background(), llm.Request{Messages: partial, Conversation: "s1"}); err != nil || n2 > 1 {
		t.Errorf("second prefill of the same prefix processed %d tokens (err %v)", n2, err)
	}
	if _, err := e.Prefill(context.Background(), llm.Request{Messages: partial}); !errors.Is(err, ErrNoConversation) {
		t.Errorf("prefill without a conversation: %v", err)
	}
}

// A Stream for the conversation a prefill is still working on takes the
// sequence over; both end cleanly and the answer is unchanged.
func TestStreamTakesOverRunningPrefill(t *testing.T) {
	spec := defaultTiny("llama", gguf.TypeQ8_0)
	e := openTiny(t, spec, nil)
	fresh := openTiny(t, spec, nil)
	long := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: longText(100)}}
	started, release := make(chan struct{}), make(chan struct{})
	go e.runOnScheduler(context.Background(), func() { close(started); <-release })
	<-started
	res := make(chan error, 1)
	go func() {
		_, err := e.Prefill(context.Background(), llm.Request{Messages: long, Conversation: "c"})
		res <- err
	}()
	for len(e.queue) == 0 { // wait until the prefill is queued behind the held scheduler
		time.Sleep(time.Millisecond)
	}
	ch, err := e.Stream(context.Background(), llm.Request{Messages: long, Conversation: "c", MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	got, _ := collect(t, ch)
	if err := <-res; err != nil {
		t.Errorf("prefill: %v", err)
	}
	want, _ := ask(t, fresh, llm.Request{Messages: long, Conversation: "c", MaxTokens: 6})
	if got != want {
		t.Errorf("answer %q after a taken-over prefill, %q without", got, want)
	}
}

func longText(words int) string {
	vocab := []string{"the", "cat", "sat", "on", "mat", "dog", "world", "hello"}
	var b []byte
	for i := 0; i < words; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, vocab[(i*5+i/3)%len(vocab)]...)
	}
	return string(b)
}

// An early-start prefill is best effort: with requests waiting for a place
// it steps aside at once.
func TestPrefillBusyWhenRequestsWait(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	started, release := make(chan struct{}), make(chan struct{})
	go e.runOnScheduler(context.Background(), func() { close(started); <-release })
	<-started
	ch, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(context.Background(), llm.Request{Messages: hello, Conversation: "p"}); !errors.Is(err, llm.ErrBusy) {
		t.Errorf("prefill with a request waiting: %v, want llm.ErrBusy", err)
	}
	close(release)
	collect(t, ch)
}

// A cancelled prefill reports the tokens it processed (they stay cached and
// the next request for the conversation reuses exactly that many), not 0:
// the early-start count in the trace is honest. Cancelled at several points,
// including mid-prompt.
func TestCancelledPrefillCountsWhatItDid(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	long := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: longText(120)}}
	midway := 0
	for i, delay := range []time.Duration{0, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		conv := fmt.Sprintf("c%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan struct {
			n   int
			err error
		}, 1)
		go func() {
			n, err := e.Prefill(ctx, llm.Request{Messages: long, Conversation: conv})
			res <- struct {
				n   int
				err error
			}{n, err}
		}()
		time.Sleep(delay)
		cancel()
		r := <-res
		_, u := ask(t, e, llm.Request{Messages: long, Conversation: conv, MaxTokens: 1})
		want := r.n
		if r.n == u.PromptTokens { // all of it: the last token runs again for its logits
			want--
		}
		if u.CachedTokens != want {
			t.Errorf("cancelled after %v: prefill reported %d tokens (err %v), the next request reused %d", delay, r.n, r.err, u.CachedTokens)
		}
		if r.err != nil && r.n > 0 {
			midway++
		}
	}
	t.Logf("%d of 6 prefills were cancelled after processing part of the prompt", midway)
}

// A speculative answer gets no rows while a committed one is active (when
// its first token exists, the committed answer's Done is already out), and
// once its Committed channel is closed it is served alongside like any other.
func TestSpeculativeWaitsForCommitted(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	run := func(committed chan struct{}) (otherDoneFirst bool) {
		// The committed answer: 480 tokens whatever the model samples.
		prompt, err := e.renderPrompt(hello, toolPrompt{}, 480)
		if err != nil {
			t.Fatal(err)
		}
		a := &request{ctx: context.Background(), req: llm.Request{Messages: hello, MaxTokens: 480, Conversation: "a"},
			prompt: prompt, out: make(chan llm.Token, 483), ignoreEOG: true}
		if err := e.enqueue(a); err != nil {
			t.Fatal(err)
		}
		<-a.out // it is decoding
		s, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 4, Conversation: "s",
			Speculative: true, Committed: committed})
		if err != nil {
			t.Fatal(err)
		}
		var first llm.Token
		if first = <-s; first.Err != nil {
			t.Fatal(first.Err)
		}
		// Tokens are produced by one goroutine in order: whatever a sent before
		// s's first token is in a's buffer now.
		done := false
		for len(a.out) > 0 {
			if tok := <-a.out; tok.Done {
				done = true
			}
		}
		if !first.Done {
			collect(t, s)
		}
		for range a.out {
		}
		return done
	}
	if !run(make(chan struct{})) {
		t.Error("the speculative answer got a token while the committed answer was still decoding")
	}
	// Once committed it is an ordinary answer (and a request that is not
	// speculative never waits).
	c := make(chan struct{})
	g := &generation{r: &request{req: llm.Request{Speculative: true, Committed: c}}}
	if !g.speculative() {
		t.Error("an uncommitted speculative request is not treated as speculative")
	}
	close(c)
	if g.speculative() || (&generation{r: &request{}}).speculative() {
		t.Error("a committed (or ordinary) request is still treated as speculative")
	}
}

// An early-start prefill beside a decoding answer gets at most
// earlyRowsBeside rows a step, and the answer a token every step: a
// 160-token answer finishes before a ~2800-token prefill started with it
// (~175 steps of 16 rows; with the whole batch, ~45 steps of 63, the
// prefill finished first).
func TestPrefillRowsBesideAnswer(t *testing.T) {
	spec := defaultTiny("llama", gguf.TypeQ8_0)
	spec.ctx = 4096
	e := openTiny(t, spec, nil)
	const maxTokens = 160
	prompt, err := e.renderPrompt(hello, toolPrompt{}, maxTokens)
	if err != nil {
		t.Fatal(err)
	}
	a := &request{ctx: context.Background(), req: llm.Request{Messages: hello, MaxTokens: maxTokens, Conversation: "a"},
		prompt: prompt, out: make(chan llm.Token, maxTokens+3), ignoreEOG: true}
	// Hold the scheduler until both are queued, so they start together.
	started, release := make(chan struct{}), make(chan struct{})
	go e.runOnScheduler(context.Background(), func() { close(started); <-release })
	<-started
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := e.Prefill(context.Background(), llm.Request{Conversation: "p",
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: longText(900)}}})
		res <- result{n, err}
	}()
	for len(e.queue) == 0 { // queued first: a prefill steps aside for a waiting request
		select {
		case r := <-res:
			close(release)
			t.Fatalf("the prefill returned before it was queued: %d tokens, %v", r.n, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := e.enqueue(a); err != nil {
		close(release)
		t.Fatal(err)
	}
	close(release)
	r := <-res
	if r.err != nil || r.n < (maxTokens+5)*earlyRowsBeside {
		t.Fatalf("prefill processed %d tokens (err %v), want >= %d", r.n, r.err, (maxTokens+5)*earlyRowsBeside)
	}
	tokens, done := 0, false
	for len(a.out) > 0 {
		tok := <-a.out
		done = done || tok.Done
		if tok.Text != "" {
			tokens++
		}
	}
	if !done {
		t.Errorf("the prefill of %d tokens finished before the %d-token answer beside it (%d tokens out)", r.n, maxTokens, tokens)
	}
	for range a.out {
	}
}
