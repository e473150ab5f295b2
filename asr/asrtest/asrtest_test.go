package asrtest

import (
	"slices"
	"testing"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello, World!", []string{"hello", "world"}},
		{"  I've got twenty-one 'quoted' items.", []string{"i've", "got", "twenty", "one", "quoted", "items"}},
		{"It’s 5 o'clock", []string{"it's", "5", "o'clock"}},
		{"", nil},
		{"...", nil},
	} {
		if have := Words(tc.in); !slices.Equal(have, tc.want) {
			t.Errorf("Words(%q): have %q, want %q", tc.in, have, tc.want)
		}
	}
}

func TestWER(t *testing.T) {
	for _, tc := range []struct {
		ref, hyp    string
		errs, words int
	}{
		{"go forward ten meters", "go forward ten meters", 0, 4},
		{"go forward ten meters", "go forward", 2, 4},               // 2 deletions
		{"go forward ten meters", "go go forward ten meters", 1, 4}, // 1 insertion
		{"ten of clubs", "i've been up close", 4, 3},                // 3 substitutions + 1 insertion
		{"", "noise", 1, 0}, // insertion into an empty reference
		{"four queen of clubs", "for queen of clubs", 1, 4}, // 1 substitution
		{"a b c d e", "a x c e", 2, 5},                      // substitution + deletion
		{"he was not an ill disposed young man", "he was not an illness those young man", 2, 8},
	} {
		errs, words := WER(Words(tc.ref), Words(tc.hyp))
		if errs != tc.errs || words != tc.words {
			t.Errorf("WER(%q, %q): have %d/%d, want %d/%d", tc.ref, tc.hyp, errs, words, tc.errs, tc.words)
		}
	}
}
