package flite

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one input token flite spoke in an utterance.
type token struct {
	name    string
	filePos int     // byte offset of the token, its prepunctuation included; -1 if unknown
	preLen  int     // bytes of prepunctuation before name
	end     float64 // seconds from the utterance start to the end of its last word; <0 if unknown
}

// wordTimer turns flite's per-utterance token timings into WordMarks
// against the original text. Tokens are located in text order from a
// cursor, so repeated words map to successive occurrences.
type wordTimer struct {
	text     string
	cursor   int        // byte offset just after the last located token
	pending  []WordMark // marks of the current utterance not yet handed out
	lastText int        // TextEnd of the last mark made
	lastEnd  int        // EndSample of the last mark made
}

// startUtterance queues the marks of a new utterance whose audio starts at
// sample base of the synthesis.
func (t *wordTimer) startUtterance(base int, toks []token) {
	t.pending = t.pending[:0]
	end := t.lastEnd
	for _, tok := range toks {
		if tok.end < 0 {
			continue // no segments: nothing of it was spoken
		}
		textEnd := t.locate(tok)
		end = max(end, base+int(math.Round(tok.end*SampleRate)))
		if textEnd <= t.lastText {
			continue // not found, or inside text already marked
		}
		t.pending = append(t.pending, WordMark{TextEnd: textEnd, EndSample: end})
		t.lastText = textEnd
		t.lastEnd = end
	}
}

// locate returns the byte offset just after tok's name in the text, or -1.
func (t *wordTimer) locate(tok token) int {
	name := tok.name
	if name == "" {
		return -1
	}
	// flite's own position is exact for plain text; trust it when it agrees.
	if tok.filePos >= 0 {
		start := tok.filePos + tok.preLen
		if start >= t.cursor && start+len(name) <= len(t.text) && t.text[start:start+len(name)] == name {
			t.cursor = start + len(name)
			return t.cursor
		}
	}
	if i := strings.Index(t.text[t.cursor:], name); i >= 0 {
		t.cursor += i + len(name)
		return t.cursor
	}
	if start := tok.filePos + tok.preLen; tok.filePos >= 0 && start >= t.cursor && start < len(t.text) {
		// flite rewrote the token: it still ends at the next space.
		end := start
		for end < len(t.text) && !unicode.IsSpace(rune(t.text[end])) {
			end++
		}
		t.cursor = end
		for end > start {
			r, size := utf8.DecodeLastRuneInString(t.text[start:end])
			if unicode.IsLetter(r) || unicode.IsNumber(r) {
				break
			}
			end -= size
		}
		if end == start {
			return t.cursor
		}
		return end
	}
	return -1
}

// take appends to dst the queued marks that end by sample upTo, or all of
// them (clamped to upTo) when the utterance is over.
func (t *wordTimer) take(dst []WordMark, upTo int, utteranceDone bool) []WordMark {
	n := 0
	for n < len(t.pending) && (utteranceDone || t.pending[n].EndSample <= upTo) {
		m := t.pending[n]
		m.EndSample = min(m.EndSample, upTo)
		dst = append(dst, m)
		n++
	}
	t.pending = t.pending[:copy(t.pending, t.pending[n:])]
	if utteranceDone {
		t.lastEnd = min(t.lastEnd, upTo)
	}
	return dst
}
