package turn

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/questions"
	"github.com/voxpipe/voxpipe/internal/testenv"
)

func TestWait(t *testing.T) {
	c := Config{Mode: ModeSemantic, MinSilenceMs: 160, MaxSilenceMs: 1300, Threshold: 0.3, DoubtMs: 800}
	ms := func(s float64) float64 { return float64(c.Wait(s)) / float64(time.Millisecond) }
	if got := ms(0.9); got != 160 {
		t.Errorf("confident: %v ms, want 160", got)
	}
	if got := ms(0.3); got != 160 {
		t.Errorf("at threshold: %v ms, want 160", got)
	}
	if got := ms(0); got != 1300 {
		t.Errorf("score 0: %v ms, want 1300", got)
	}
	if got := ms(math.NaN()); got != 1300 {
		t.Errorf("no score: %v ms, want 1300", got)
	}
	// One unit of log-odds short: 800 ms more.
	if got, want := ms(1/(1+math.Exp(1-math.Log(0.3/0.7)))), 960.0; math.Abs(got-want) > 1 {
		t.Errorf("one unit of log-odds below the threshold: %v ms, want %v", got, want)
	}
	prev := ms(0)
	for s := 0.01; s < 0.3; s += 0.01 {
		w := ms(s)
		if w > prev || w < 160 || w > 1300 {
			t.Fatalf("wait %v ms at score %.2f after %v ms: not decreasing within [160, 1300]", w, s, prev)
		}
		prev = w
	}
}

func TestValidate(t *testing.T) {
	good := DefaultConfig()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Config{
		{Mode: "smart"},
		{Mode: ModeSemantic, MinSilenceMs: 0, MaxSilenceMs: 1000, Threshold: 0.5},
		{Mode: ModeSemantic, MinSilenceMs: 400, MaxSilenceMs: 300, Threshold: 0.5},
		{Mode: ModeSemantic, MinSilenceMs: 160, MaxSilenceMs: 1000, Threshold: 1},
		{Mode: ModeSemantic, MinSilenceMs: 160, MaxSilenceMs: 20000, Threshold: 0.5},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", c, err)
		}
	}
	if err := (Config{Mode: ModeSilence}).Validate(); err != nil {
		t.Errorf("silence mode needs no other keys: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	cases := map[string]string{
		"What's the weather like in Paris?":  "what's the weather like in paris",
		"Set a timer for 25 minutes, please": "set a timer for twenty five minutes please",
		"  it's   3 o'clock ":                "it's three o'clock",
		"room 101":                           "room one hundred one",
		"'quoted' words - and dashes":        "quoted words and dashes",
		"":                                   "",
		"?!":                                 "",
	}
	for in, want := range cases {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
	long := ""
	for i := 0; i < MaxWords+10; i++ {
		long += "word "
	}
	long += "end"
	if got := Normalize(long); len(got) == 0 || got[len(got)-3:] != "end" || len(splitWords(got)) != MaxWords {
		t.Errorf("long text: %d words ending %q, want the last %d", len(splitWords(got)), got[len(got)-3:], MaxWords)
	}
}

func splitWords(s string) []string {
	var out []string
	w := ""
	for _, r := range s + " " {
		if r == ' ' {
			if w != "" {
				out = append(out, w)
			}
			w = ""
			continue
		}
		w += string(r)
	}
	return out
}

// eouModel is the shipped end-of-utterance model, or the demo draft (the
// model it was fine-tuned from, same tokenizer) where it is absent.
func eouModel(t testing.TB) (path string, trained bool) {
	dir := testenv.RepoRoot(t)
	p := filepath.Join(dir, "models", "voxpipe-eou-q8_0.gguf")
	if _, err := os.Stat(p); err == nil {
		return p, true
	}
	p = filepath.Join(dir, "models", "voxpipe-demo-draft-q8_0.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no model to score with: %v", err)
	}
	return p, false
}

func TestLMScores(t *testing.T) {
	path, trained := eouModel(t)
	s, err := OpenLM(path, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// Growing partials under one key reuse the cache; the score must not
	// depend on that (compare with a fresh key).
	texts := []string{"what is", "what is the capital of", "what is the capital of france"}
	for _, text := range texts {
		a, err := s.Score(ctx, "grow", text)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Score(ctx, "fresh-"+text, text)
		if err != nil {
			t.Fatal(err)
		}
		if a < 0 || a > 1 || math.Abs(a-b) > 1e-6 {
			t.Fatalf("%q: %v with the cache, %v without", text, a, b)
		}
	}
	if v, err := s.Score(ctx, "k", "  "); err != nil || v != 0 {
		t.Errorf("empty text: %v, %v; want 0, nil", v, err)
	}
	if !trained {
		t.Skip("models/voxpipe-eou-q8_0.gguf absent: scored with the demo draft, ordering not checked")
	}
	// Pairs a trained model must order (complete above its own cut-off).
	pairs := [][2]string{
		{"what is the capital of france", "what is the capital of"},
		{"set a timer for ten minutes", "set a timer for"},
		{"can you tell me how a compiler works", "can you tell me how a"},
		{"turn off the lights in the kitchen", "turn off the lights in the"},
	}
	for _, p := range pairs {
		c, _ := s.Score(ctx, "a", p[0])
		u, _ := s.Score(ctx, "b", p[1])
		if c <= u {
			t.Errorf("%q scores %.3f, not above its cut %q at %.3f", p[0], c, p[1], u)
		}
	}
}

// TestEverydayAUC: the shipped scorer separates bench eou's everyday turns
// from their cut-offs (60 complete, 240 cut off; internal/bench/testdata)
// with an AUC of at least 0.95. It measures 0.967; the scorer before it
// 0.964, and the one before that, which had learnt that requests like
// "what time is it" go on, 0.925 (models/README.md).
func TestEverydayAUC(t *testing.T) {
	path, trained := eouModel(t)
	if !trained {
		t.Skip("models/voxpipe-eou-q8_0.gguf absent")
	}
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "internal", "bench", "testdata", "eou-everyday.tsv"))
	if err != nil {
		t.Skipf("everyday set not found: %v", err)
	}
	s, err := OpenLM(path, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var complete, cut []float64
	for _, line := range strings.Split(string(raw), "\n") {
		label, text, ok := strings.Cut(line, "\t")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		text, _, _ = strings.Cut(text, "\t")
		v, err := s.Score(context.Background(), "k", text)
		if err != nil {
			t.Fatal(err)
		}
		if label == "1" {
			complete = append(complete, v)
		} else {
			cut = append(cut, v)
		}
	}
	if len(complete) < 50 || len(cut) < 200 {
		t.Fatalf("read %d complete and %d cut-off texts, want the whole set", len(complete), len(cut))
	}
	var above float64 // pairs ordered right, ties half (Mann-Whitney)
	for _, c := range complete {
		for _, u := range cut {
			switch {
			case c > u:
				above++
			case c == u:
				above += 0.5
			}
		}
	}
	auc := above / float64(len(complete)*len(cut))
	t.Logf("AUC %.3f over %d complete and %d cut-off texts", auc, len(complete), len(cut))
	if auc < 0.95 {
		t.Errorf("AUC %.3f, want >= 0.95", auc)
	}
}

// TestShortTurns: the short everyday turns people say most to an assistant
// (questions.Short: "what time is it", "thank you", "stop") read as complete
// often enough that half of them end the turn without the long wait: their
// median score is at least 0.4. The scorer before the shipped one, for
// which each was whole once in its data against hundreds of longer turns it
// begins, had a median of 0.26 ("what time is it" 0.10, "thank you" 0.08),
// and they waited 1.3 s; the shipped one measures 0.51.
func TestShortTurns(t *testing.T) {
	path, trained := eouModel(t)
	if !trained {
		t.Skip("models/voxpipe-eou-q8_0.gguf absent")
	}
	s, err := OpenLM(path, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var scores []float64
	for _, q := range questions.Short {
		v, err := s.Score(context.Background(), "k", q)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%.3f %s", v, q)
		scores = append(scores, v)
	}
	sort.Float64s(scores)
	median := (scores[(len(scores)-1)/2] + scores[len(scores)/2]) / 2
	if median < 0.4 {
		t.Errorf("median score %.3f of the short turns, want >= 0.4", median)
	}
}

func BenchmarkLMScore(b *testing.B) {
	path, _ := eouModel(b)
	s, err := OpenLM(path, 1, 4)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	words := []string{"can", "you", "tell", "me", "what", "the", "weather", "will", "be", "like", "in", "paris", "tomorrow"}
	b.Run("growing", func(b *testing.B) { // a new word per partial, as the recogniser emits them
		for i := 0; i < b.N; i++ {
			n := 1 + i%len(words)
			text := ""
			for _, w := range words[:n] {
				text += w + " "
			}
			if _, err := s.Score(ctx, "grow", text); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fresh", func(b *testing.B) { // the whole utterance, no cache
		for i := 0; i < b.N; i++ {
			if _, err := s.Score(ctx, "fresh", words[i%2]+" you tell me what the weather will be like in paris tomorrow"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
