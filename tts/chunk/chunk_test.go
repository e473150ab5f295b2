package chunk

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// run pushes each delta and flushes, returning every chunk in order.
func run(cfg Config, deltas ...string) []string {
	c := New(cfg)
	var out []string
	for _, d := range deltas {
		out = append(out, c.Push(d)...)
	}
	if s := c.Flush(); s != "" {
		out = append(out, s)
	}
	return out
}

// byRune splits s into one delta per rune, the worst case for hold-back.
func byRune(s string) []string {
	var d []string
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s) // keeps invalid bytes as they are
		d = append(d, s[:n])
		s = s[n:]
	}
	return d
}

func TestChunker(t *testing.T) {
	def := DefaultConfig()
	noClause := Config{FirstClauseMinWords: 100, MaxChars: 200}
	cases := []struct {
		name string
		cfg  Config
		text string
		want []string
	}{
		{"first clause then sentences", def,
			"Sure, I can help with that, gladly. The value of pi is 3.14, roughly! Bye",
			[]string{"Sure, I can help with that,", "gladly.", "The value of pi is 3.14, roughly!", "Bye"}},
		{"short first clause waits", def,
			"Well, let me think about it; okay. Next",
			[]string{"Well, let me think about it;", "okay.", "Next"}},
		{"first sentence beats clause", def,
			"Yes. Of course, my friend, any time.",
			[]string{"Yes.", "Of course, my friend, any time."}},
		{"later commas do not cut", def,
			"Hello there. First, second, third, fourth and fifth.",
			[]string{"Hello there.", "First, second, third, fourth and fifth."}},
		{"abbreviations", noClause,
			"Dr. Smith met Mr. Jones and Mrs. Lee at St. Mary's. They talked vs. argued.",
			[]string{"Dr. Smith met Mr. Jones and Mrs. Lee at St. Mary's.", "They talked vs. argued."}},
		{"latin abbreviations", noClause,
			"Use fruit, e.g. apples, i.e. red ones, etc. and more. Done.",
			[]string{"Use fruit, e.g. apples, i.e. red ones, etc. and more.", "Done."}},
		{"dotted initials", noClause,
			"He moved to the U.S. in May. J. R. R. Tolkien wrote it. Fine.",
			[]string{"He moved to the U.S. in May.", "J. R. R. Tolkien wrote it.", "Fine."}},
		{"numbers", def,
			"It costs 1,000 dollars at 3:30 today. The rate is 2.5 percent, or .5 more.",
			[]string{"It costs 1,000 dollars at 3:30 today.", "The rate is 2.5 percent, or .5 more."}},
		{"ellipsis", def,
			"Well... I think so. Hmm… maybe. Yes.",
			[]string{"Well... I think so.", "Hmm… maybe.", "Yes."}},
		{"question and exclamation runs", def,
			"Really?! Yes!! Are you sure?",
			[]string{"Really?!", "Yes!!", "Are you sure?"}},
		{"closing quotes and brackets", def,
			`He said "stop." Then (quietly.) he left. (Done.) Bye`,
			[]string{`He said "stop."`, `Then (quietly.) he left.`, "(Done.)", "Bye"}},
		{"not a sentence end inside a word", def,
			"Visit example.com or v1.2 today. Bye.",
			[]string{"Visit example.com or v1.2 today.", "Bye."}},
		{"markdown", def,
			"**Bold** and `code` _here_.\n## Heading\n- item one\n- item *two*\n\n```\nx\n```",
			[]string{"Bold and code here.", "Heading", "item one", "item two", "x"}},
		{"numbered list", def,
			"Steps:\n1. Open it.\n2. Close it.\n3. Done",
			[]string{"Steps:", "1. Open it.", "2. Close it.", "3. Done"}},
		{"unknown abbreviation before a lower-case word", noClause,
			"It was founded by Acme Corp. and grew fast. Then it sold.",
			[]string{"It was founded by Acme Corp. and grew fast.", "Then it sold."}},
		{"number ends a sentence mid-line", noClause,
			"I counted to 3. Then I stopped.",
			[]string{"I counted to 3.", "Then I stopped."}},
		{"white space collapsed", def,
			"  Lots   of\tspace  here.   Next  one. ",
			[]string{"Lots of space here.", "Next one."}},
		{"punctuation-only chunks dropped", def,
			"---\nHi.\n...\n",
			[]string{"Hi."}},
		{"em dash first clause", def,
			"The answer—as you know—is 42. Right.",
			[]string{"The answer—as you know—", "is 42.", "Right."}},
		{"cjk", def,
			"你好。今天天气很好！对吗？",
			[]string{"你好。", "今天天气很好！", "对吗？"}},
		{"max chars cut at last space", Config{FirstClauseMinWords: 3, MaxChars: 20},
			"one two three four five six seven eight nine ten eleven twelve",
			[]string{"one two three four", "five six seven eight", "nine ten eleven", "twelve"}},
		{"max chars long word", Config{FirstClauseMinWords: 3, MaxChars: 5},
			"supercalifragilistic is long",
			[]string{"supercalifragilistic", "is", "long"}},
		{"empty", def, "", nil},
		{"only markdown", def, "** ## ``", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for mode, deltas := range map[string][]string{
				"one delta": {tc.text},
				"per rune":  byRune(tc.text),
			} {
				if got := run(tc.cfg, deltas...); !slices.Equal(got, tc.want) {
					t.Errorf("%s:\n have %q\n want %q", mode, got, tc.want)
				}
			}
		})
	}
}

// TestChunkerHoldsBack: text that may still turn out not to be a boundary
// is not emitted until the next delta decides.
func TestChunkerHoldsBack(t *testing.T) {
	steps := []struct {
		delta string
		want  []string
	}{
		{"Pi is 3.", nil},   // maybe 3.14
		{"14 exactly", nil}, // decided: no boundary
		{". Ask Dr.", []string{"Pi is 3.14 exactly."}},
		{" Who, ", nil}, // Dr. is not an end; first chunk emitted, so no clause cut
		{"he knows", nil},
		{"! The time is 3:", []string{"Ask Dr. Who, he knows!"}},
		{"30. Yes", []string{"The time is 3:30."}},
	}
	c := New(DefaultConfig())
	for _, s := range steps {
		if got := c.Push(s.delta); !slices.Equal(got, s.want) {
			t.Fatalf("Push(%q) = %q, want %q", s.delta, got, s.want)
		}
	}
	if got := c.Flush(); got != "Yes" {
		t.Fatalf("Flush() = %q, want %q", got, "Yes")
	}
	if got := c.Flush(); got != "" {
		t.Fatalf("second Flush() = %q, want empty", got)
	}
}

// TestChunkerFirstClauseEarly: the first clause goes out as soon as the
// delta that completes it arrives.
func TestChunkerFirstClauseEarly(t *testing.T) {
	c := New(DefaultConfig())
	for _, d := range []string{"Sure", ",", " I", " can", " do", " that", ","} {
		if got := c.Push(d); got != nil {
			t.Fatalf("Push(%q) = %q before the clause was decided", d, got)
		}
	}
	if got := c.Push(" and"); !slices.Equal(got, []string{"Sure, I can do that,"}) {
		t.Fatalf("got %q", got)
	}
}

func TestChunkerReset(t *testing.T) {
	c := New(DefaultConfig())
	c.Push("Half a sent")
	c.Reset()
	if got := c.Push("One, two, three, four. Five"); !slices.Equal(got, []string{"One, two, three,", "four."}) {
		t.Fatalf("after Reset got %q: the first-clause rule must apply again", got)
	}
}

// alnum keeps the letters and digits of s: the chunker may drop markup and
// white space but must never lose or reorder a word.
func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, strings.ToValidUTF8(s, ""))
}

// FuzzChunkerSplit feeds the same text as one delta and split at a fuzzed
// offset into two (and per rune); the chunks must be identical, and no
// letter or digit may be lost. Seeds are committed under
// testdata/fuzz/FuzzChunkerSplit.
func FuzzChunkerSplit(f *testing.F) {
	f.Add("Sure, I can help. Pi is 3.14, e.g. roughly! Dr. Who at 3:30... ok?", uint(9), uint8(3), uint8(60))
	f.Add("1. **One**\n2. `two`\n- three", uint(4), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, text string, offset uint, minWords, maxChars uint8) {
		cfg := Config{FirstClauseMinWords: int(minWords % 8), MaxChars: int(maxChars)}
		whole := run(cfg, text)
		split := int(offset % uint(len(text)+1))
		if got := run(cfg, text[:split], text[split:]); !slices.Equal(got, whole) {
			t.Fatalf("split at %d:\n have %q\n want %q", split, got, whole)
		}
		if len(text) < 2000 {
			if got := run(cfg, byRune(text)...); !slices.Equal(got, whole) {
				t.Fatalf("per rune:\n have %q\n want %q", got, whole)
			}
		}
		markdownFree := strings.NewReplacer("*", "", "#", "", "`", "", "_", "").Replace(text)
		if a, b := alnum(strings.Join(whole, " ")), alnum(markdownFree); a != b {
			t.Fatalf("text lost: chunks %q keep %q of %q", whole, a, b)
		}
		for _, c := range whole {
			if c == "" || c != strings.TrimSpace(c) || !utf8.ValidString(c) {
				t.Fatalf("bad chunk %q", c)
			}
		}
	})
}

// BenchmarkChunkerPush feeds a typical answer token by token (~4 bytes per
// delta), the per-token path.
func BenchmarkChunkerPush(b *testing.B) {
	text := strings.Repeat("Sure, I can help with that. The meeting is at 3:30 p.m. on Friday, e.g. after lunch! ", 4)
	var deltas []string
	for i := 0; i < len(text); i += 4 {
		deltas = append(deltas, text[i:min(i+4, len(text))])
	}
	c := New(DefaultConfig())
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range deltas {
			c.Push(d)
		}
		c.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(deltas)), "ns/delta")
}

// TestChunkerPushNoAllocs: a delta that completes no chunk costs no
// allocation (the per-token path).
func TestChunkerPushNoAllocs(t *testing.T) {
	c := New(DefaultConfig())
	deltas := []string{"The", " meeting", " is", " at", " 3", ":", "30", " p", ".m", ". on", " Friday"}
	c.Push(strings.Repeat("warm up the buffer ", 8))
	c.Reset()
	allocs := testing.AllocsPerRun(100, func() {
		for _, d := range deltas {
			if got := c.Push(d); got != nil {
				t.Fatalf("Push(%q) = %q", d, got)
			}
		}
		c.Reset()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per sentence of pushes, want 0", allocs)
	}
}
