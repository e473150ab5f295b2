package espeak

import (
	"unicode"
	"unicode/utf8"
)

// wordTracker turns espeak's word-start events into WordMarks: a word
// ends where the next one starts, at a clause end, or at the end of the
// text. espeak reports several words for one token ("1234" is spoken as
// "one thousand ..."), all pointing into the token; they merge into one mark
// at the token's end.
type wordTracker struct {
	text       string
	runeByte   []int // byte offset of each rune, then len(text)
	pendingEnd int   // TextEnd of the word being spoken; -1 if none
	lastText   int   // TextEnd of the last mark made
	lastEnd    int   // EndSample of the last mark made
}

func newWordTracker(text string) wordTracker {
	t := wordTracker{text: text, pendingEnd: -1, runeByte: make([]int, 0, len(text)+1)}
	for i := range text {
		t.runeByte = append(t.runeByte, i)
	}
	t.runeByte = append(t.runeByte, len(text))
	return t
}

// byteAt converts a 0-based character index to a byte offset.
func (t *wordTracker) byteAt(char int) int {
	return t.runeByte[min(max(char, 0), len(t.runeByte)-1)]
}

// textEnd maps a word event (1-based character position, length in
// characters) to the byte offset just after the word's last letter or
// digit, never past the whitespace-delimited token it starts in.
func (t *wordTracker) textEnd(textPos, length int) int {
	start := t.byteAt(textPos - 1)
	end := t.byteAt(textPos - 1 + max(length, 1))
	for i, r := range t.text[start:end] {
		if unicode.IsSpace(r) {
			end = start + i
			break
		}
	}
	trimmed := end
	for trimmed > start {
		r, size := utf8.DecodeLastRuneInString(t.text[start:trimmed])
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return trimmed
		}
		trimmed -= size
	}
	return end // punctuation only
}

// word records the start of a word at sample; the word before it, if any,
// ends there.
func (t *wordTracker) word(textPos, length, sample int) (WordMark, bool) {
	end := t.textEnd(textPos, length)
	if t.pendingEnd >= 0 {
		if end <= t.pendingEnd {
			return WordMark{}, false // another word of the same token
		}
		// espeak speaks some unstressed words together with the one before
		// ("for a walk" reports "for" and "walk"), so the word ending here
		// covers the text up to the new one.
		t.pendingEnd = max(t.pendingEnd, t.wordEndBefore(t.byteAt(textPos-1)))
		m, ok := t.close(sample)
		t.pendingEnd = end
		return m, ok
	}
	if end > t.lastText {
		t.pendingEnd = end
	}
	return WordMark{}, false
}

// wordEndBefore returns the offset just after the last letter or digit
// before byte offset at, or 0.
func (t *wordTracker) wordEndBefore(at int) int {
	for at > 0 {
		r, size := utf8.DecodeLastRuneInString(t.text[:at])
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return at
		}
		at -= size
	}
	return 0
}

// close ends the word being spoken at sample.
func (t *wordTracker) close(sample int) (WordMark, bool) {
	if t.pendingEnd < 0 {
		return WordMark{}, false
	}
	m := WordMark{TextEnd: t.pendingEnd, EndSample: max(sample, t.lastEnd)}
	t.lastText, t.lastEnd, t.pendingEnd = m.TextEnd, m.EndSample, -1
	return m, true
}
