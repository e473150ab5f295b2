package engine

import (
	"slices"
	"testing"
)

// TestOpenings: a closing "what is X" question, however the prompt puts
// it, gives the sentences an answer to it opens with; anything else none.
func TestOpenings(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Facts that may help:\nvolcano: a fissure in the earth's crust\n\nQuestion: What is a volcano?", []string{"A volcano is a", "Volcano is"}},
		{"What is an umbrella?", []string{"An umbrella is a", "Umbrella is"}},
		{"what is bread", []string{"Bread is"}},
		{"What is the moon?\n", []string{"The moon is", "Moon is"}},
		{"Who was Ada Lovelace?", []string{"Ada Lovelace was"}},
		{"What are volcanoes?", []string{"Volcanoes are"}},
		{"Repeat after me: the cat sat on the mat.", nil},
		{"What is a volcano?\nAnd tell me a joke.", nil}, // the question is not the last line
		{"What is the capital of France, Spain and Italy?", nil},
		{"", nil},
	} {
		if got := openings(c.text); !slices.Equal(got, c.want) {
			t.Errorf("openings(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	opens := []string{"A volcano is a", "Volcano is"}
	for _, c := range []struct{ answer, want string }{
		{"", "A volcano is a"},
		{"A", " volcano is a"},
		{"A vol", "cano is a"},
		{"V", "olcano is"},
		{"A volcano is a", ""}, // complete
		{"The", ""},            // none begun
	} {
		if got := openingRest(opens, c.answer); got != c.want {
			t.Errorf("openingRest(%q) = %q, want %q", c.answer, got, c.want)
		}
	}
}

// TestLookupSubstitution: a token the target has replaced with the same
// other token twice running is proposed as that token, the proposal ending
// after it; keeping the original token, or the target choosing something
// else in place of the substitute, takes the correction back; an answer
// that ends instead teaches nothing.
func TestLookupSubstitution(t *testing.T) {
	const (
		end     = 0 // a control token
		a       = 1
		newline = 2
		stop    = 3 // "."
		b       = 4
	)
	sp := newSpeculator(5, nil, 0.05)
	sp.stopAt = []uint8{stopBefore, 0, stopAfter, 0, 0}
	propose := func(props ...int32) []int32 {
		props = props[:sp.cutDraft(props)]
		return props[:sp.substitute(props)]
	}
	if got := propose(a, newline, b); !slices.Equal(got, []int32{a, newline}) {
		t.Fatalf("nothing learnt: proposal %v", got)
	}
	sp.learn(1, newline, stop, false)
	if got := propose(a, newline); !slices.Equal(got, []int32{a, newline}) {
		t.Fatalf("one correction: proposal %v, want it unchanged", got)
	}
	sp.learn(1, newline, end, false) // the answer ended: no evidence either way
	sp.learn(1, newline, stop, false)
	if got := propose(a, newline, b); !slices.Equal(got, []int32{a, stop}) {
		t.Fatalf("two corrections: proposal %v, want [a .]", got)
	}
	sp.learn(1, stop, stop, true) // the substitute kept: the correction stands
	if got := propose(newline, a); !slices.Equal(got, []int32{stop}) {
		t.Fatalf("after a kept substitute: proposal %v, want [.]", got)
	}
	sp.learn(0, stop, b, false) // the substitute rejected for b: counting starts again, for b
	if got := propose(newline); !slices.Equal(got, []int32{newline}) {
		t.Fatalf("after a rejected substitute: proposal %v, want [newline]", got)
	}
	sp.learn(0, newline, b, false)
	if got := propose(newline); !slices.Equal(got, []int32{b}) {
		t.Fatalf("b twice: proposal %v, want [b]", got)
	}
	sp.learn(0, b, b, true)
	propose(a, b)
	sp.learn(1, b, b, true) // b itself kept: says nothing of newline
	if got := propose(newline); !slices.Equal(got, []int32{b}) {
		t.Fatalf("proposal %v, want [b]", got)
	}
	sp.subTo[a], sp.subN[a] = b, subMin
	propose(a)
	sp.learn(0, b, b, true)
	sp.subAt = -1
	sp.learn(0, a, a, true) // the original token kept: its correction goes
	if got := propose(a); !slices.Equal(got, []int32{a}) {
		t.Fatalf("after a kept original: proposal %v, want [a]", got)
	}
	// A draft model's speculator learns nothing.
	if d := newSpeculator(5, &draftModel{}, 0.05); d.subN != nil {
		t.Fatal("draft speculator keeps corrections")
	}
}
