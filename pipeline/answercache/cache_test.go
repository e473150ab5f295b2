package answercache

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/tts"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestParaphrasesShareAKeyAndOthersDoNot(t *testing.T) {
	if s := Similarity(Parse("what does the word harbor mean"), Parse("what does the word harbour mean")); s < DefaultThreshold {
		t.Errorf("the recogniser's British spelling does not match: %.2f", s)
	}
	same := []string{"what's the capital of france", "tell me the capital of france", "france's capital?", "What is the capital of France?"}
	for _, q := range same[1:] {
		if s := Similarity(Parse(same[0]), Parse(q)); s < DefaultThreshold {
			t.Errorf("%q vs %q: similarity %.2f, want a match (%s vs %s)", same[0], q, s, Parse(same[0]).Key(), Parse(q).Key())
		}
	}
	for _, q := range []string{"what's the capital of spain", "what's the population of france", "is a cat bigger than a dog", "what is two divided by ten"} {
		other := map[string]string{"is a cat bigger than a dog": "is a dog bigger than a cat", "what is two divided by ten": "what is ten divided by two"}[q]
		if other == "" {
			other = same[0]
		}
		if s := Similarity(Parse(other), Parse(q)); s >= DefaultThreshold {
			t.Errorf("%q vs %q: similarity %.2f, want no match", other, q, s)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		q     string
		prior int
		want  string
	}{
		{"what is the capital of france", 0, ""},
		{"what is the capital of france", 3, ""},
		{"what about spain", 1, ReasonContext},
		{"tell me more", 1, ReasonContext},
		{"who wrote it", 2, ReasonContext},
		{"what time is it", 0, ReasonTime},
		{"what's the weather like today", 0, ReasonTime},
		{"what is my name", 0, ReasonPersonal},
		{"where am i", 0, ReasonPersonal},
		{"set a timer for ten minutes", 0, ReasonAction},
		{"turn the volume up", 0, ReasonAction},
		{"um", 0, ReasonVague},
	} {
		if got := Classify(Parse(c.q), c.prior); got != c.want {
			t.Errorf("Classify(%q, %d) = %q, want %q (%+v)", c.q, c.prior, got, c.want, Parse(c.q))
		}
	}
}

func pieces(samples int) []Piece {
	return []Piece{{Text: "An answer.", Audio: []tts.Chunk{{PCM: make([]int16, samples)}}}}
}

func TestStoreLookupScopeAndReplace(t *testing.T) {
	c := New(Config{})
	a, b := Scope{Model: "a"}, Scope{Model: "b"}
	m := Parse("what is a volcano")
	if c.Lookup(a, m) != nil {
		t.Fatal("hit in an empty cache")
	}
	if !c.Store(a, m, "what is a volcano", "A mountain.", pieces(100)) {
		t.Fatal("not stored")
	}
	if e := c.Lookup(a, Parse("what's a volcano")); e == nil || e.Answer != "A mountain." || e.AudioBytes() != 200 {
		t.Fatalf("lookup = %+v, want the answer with 200 bytes of audio", e)
	}
	if c.Lookup(b, m) != nil {
		t.Error("an answer of model a served in model b's scope")
	}
	c.Store(a, m, "what is a volcano", "A vent.", nil)
	if e := c.Lookup(a, m); e == nil || e.Answer != "A vent." {
		t.Errorf("after a second store lookup = %+v, want the new answer", e)
	}
	if s := c.Stats(); s.Entries != 1 || s.Hits != 2 || s.Misses != 2 || s.AudioBytes != 0 {
		t.Errorf("stats %+v, want 1 entry, 2 hits, 2 misses, no audio", s)
	}
	if c.Store(a, m, "what is a volcano", "  ", nil) || c.Store(a, Parse("um"), "um", "Hm.", nil) {
		t.Error("an empty answer or a question without content words was stored")
	}
}

func TestTTLWithJitter(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c := New(Config{TTL: time.Hour, Jitter: 0.5, Now: clock.now})
	draws := []float64{0, 1}
	c.rand = func() float64 { d := draws[0]; draws = draws[1:]; return d }
	s := Scope{}
	long, short := Parse("what is a kettle"), Parse("what is a piano")
	c.Store(s, long, "", "k", nil)  // draw 0: the whole hour
	c.Store(s, short, "", "p", nil) // draw 1: half of it
	clock.t = clock.t.Add(31 * time.Minute)
	if c.Lookup(s, short) != nil {
		t.Error("the entry with the full jitter was served after 31 of its 30 minutes")
	}
	if c.Lookup(s, long) == nil {
		t.Error("the entry without jitter expired after 31 of its 60 minutes")
	}
	clock.t = clock.t.Add(30 * time.Minute)
	if c.Lookup(s, long) != nil {
		t.Error("served after its TTL")
	}
	if st := c.Stats(); st.Expired != 2 || st.Entries != 0 {
		t.Errorf("stats %+v, want 2 expired and none left", st)
	}
}

func TestBoundsEvictLeastRecentlyUsed(t *testing.T) {
	c := New(Config{MaxEntries: 2, MaxAudioBytes: 1000})
	s := Scope{}
	q := []Meaning{Parse("what is a kettle"), Parse("what is a piano"), Parse("what is bread")}
	c.Store(s, q[0], "", "0", nil)
	c.Store(s, q[1], "", "1", nil)
	c.Lookup(s, q[0]) // 0 is now the most recent
	c.Store(s, q[2], "", "2", nil)
	if c.Lookup(s, q[1]) != nil || c.Lookup(s, q[0]) == nil || c.Lookup(s, q[2]) == nil {
		t.Error("the entry bound did not evict the least recently used entry")
	}
	// Audio: five answers of 200 bytes fill 1000; a sixth evicts one.
	c = New(Config{MaxAudioBytes: 1000})
	for i, q := range []string{"what is a kettle", "what is a piano", "what is bread", "what is a chair", "what is a bridge", "what is a candle"} {
		c.Store(s, Parse(q), q, fmt.Sprint(i), pieces(100))
	}
	if st := c.Stats(); st.AudioBytes != 1000 || st.Evictions != 1 || st.Entries != 5 {
		t.Errorf("stats %+v, want 1000 audio bytes in 5 entries after one eviction", st)
	}
	if c.Lookup(s, Parse("what is a kettle")) != nil {
		t.Error("the oldest entry was not the one evicted")
	}
	// Over a quarter of the bound (250 bytes): kept without its audio.
	c.Store(s, Parse("what is a river"), "", "r", pieces(200))
	if e := c.Lookup(s, Parse("what is a river")); e == nil || e.Pieces != nil {
		t.Errorf("an answer with 400 bytes of audio against a 1000 byte bound: %+v, want it kept without audio", e)
	}
}

func TestKnowledgeVersionFlushes(t *testing.T) {
	c := New(Config{})
	m := Parse("what is a glacier")
	c.Store(Scope{Knowledge: "v1"}, m, "", "ice", nil)
	if c.Lookup(Scope{Knowledge: "v1"}, m) == nil {
		t.Fatal("miss in the same version")
	}
	if c.Lookup(Scope{Knowledge: "v2"}, m) != nil {
		t.Error("an answer of knowledge v1 served under v2")
	}
	if st := c.Stats(); st.Entries != 0 || st.Flushes != 1 {
		t.Errorf("stats %+v, want the new version to flush every entry", st)
	}
	c.Store(Scope{Knowledge: "v2"}, m, "", "ice v2", nil)
	// A turn looked up under v2 ends after a lookup saw v3: its answer is
	// dropped, and the v3 entries stay.
	c.Lookup(Scope{Knowledge: "v3"}, m)
	c.Store(Scope{Knowledge: "v3"}, Parse("what is a river"), "", "water", nil)
	if c.Store(Scope{Knowledge: "v2"}, m, "", "ice v2", nil) {
		t.Error("an answer of knowledge v2 was stored after v3 came")
	}
	if c.Lookup(Scope{Knowledge: "v3"}, Parse("what is a river")) == nil {
		t.Error("a late store of an older version flushed the new version's entries")
	}
}

// BenchmarkLookup10k looks up a question among 10,000 entries (half of
// them of the same shape, "what is a thingN"), hits and misses in turn; it
// reports the p99 of single lookups as p99-ns.
func BenchmarkLookup10k(b *testing.B) {
	c := New(Config{MaxEntries: 20000})
	s := Scope{Model: "m", SystemPrompt: "You are a helpful assistant."}
	for i := range 10000 {
		q := fmt.Sprintf("what is a thing%d", i)
		if i%2 == 1 {
			q = fmt.Sprintf("who wrote the book number%d of the series", i)
		}
		c.Store(s, Parse(q), q, "an answer", pieces(16))
	}
	qs := []string{"what's a thing4242", "tell me who wrote the book number4243 of the series", "what is a thingamajig", "can you tell me what a thing17 is"}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		c.Lookup(s, Parse(qs[i%len(qs)]))
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slicesSortDurations(durs)
	if len(durs) > 0 {
		b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
	}
}

func slicesSortDurations(d []time.Duration) { slices.Sort(d) }
