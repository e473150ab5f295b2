// Package asrtest holds helpers for tests of speech recognisers: word
// normalisation and word error rate.
package asrtest

import (
	"strings"
	"unicode"
)

// Words splits s into lower-case words with punctuation removed, the
// normalisation used for WER: "Hello, World!" → [hello world]. Hyphens and
// other punctuation separate words ("twenty-one" → [twenty one]); an
// apostrophe inside a word is kept ("i've", "don't"), since pocketsphinx's
// dictionary spells contractions that way.
func Words(s string) []string {
	var words []string
	var b strings.Builder
	flush := func() {
		w := strings.Trim(b.String(), "'")
		if w != "" {
			words = append(words, w)
		}
		b.Reset()
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case r == '\'' || r == '’':
			b.WriteRune('\'')
		default:
			flush()
		}
	}
	flush()
	return words
}

// WER returns the word-level edit distance between ref and hyp
// (substitutions + deletions + insertions) and the number of reference
// words; the error rate is errors/words. Words are compared as given: pass
// them through Words first.
func WER(ref, hyp []string) (errors, words int) {
	// One row of the Levenshtein table at a time.
	prev := make([]int, len(hyp)+1)
	cur := make([]int, len(hyp)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ref); i++ {
		cur[0] = i
		for j := 1; j <= len(hyp); j++ {
			sub := prev[j-1]
			if ref[i-1] != hyp[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(hyp)], len(ref)
}
