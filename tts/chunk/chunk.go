// Package chunk cuts a streamed LLM answer into speakable pieces for TTS.
//
// The first piece goes out as soon as it is speakable: at the first clause
// break (, ; : —) once it has FirstClauseMinWords words, or at the first
// sentence end, whichever comes first. Later pieces end at sentence ends
// (. ! ? and newlines), so the TTS gets natural prosody units. A piece that
// grows past MaxChars without a boundary is cut at a space.
//
// Whatever could still turn out not to be a boundary is held back until
// the next delta decides it: "3." may become 3.14, "Dr." is never an end,
// "..." is a pause, "1,000" and 3:30 are numbers, and a period followed by
// a lower-case word ("Corp. and") is an abbreviation. Every decision depends
// only on the text, never on how it was split into deltas, so the same
// answer always gives the same chunks (the fuzz test checks this).
//
// Markdown that a TTS engine would read aloud (*, _, #, backticks, bullet
// dashes) is removed; the words stay.
//
// A Chunker is not safe for concurrent use; it belongs to the goroutine
// that reads the LLM's tokens.
package chunk

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Config tunes the chunker.
type Config struct {
	// FirstClauseMinWords is how many words the first chunk needs before a
	// clause break (, ; : —) may end it. Fewer words ("Well,", "Sure,")
	// would be a TTS call that sounds clipped for almost no latency gain.
	FirstClauseMinWords int
	// MaxChars forces a cut at a space when a chunk grows past this many
	// bytes without a boundary (0 or less: never). It bounds the TTS
	// latency of run-on sentences and lists without punctuation.
	MaxChars int
}

// DefaultConfig returns the pipeline's settings: the first clause may go
// out after 3 words, and no chunk runs past 200 bytes.
func DefaultConfig() Config {
	return Config{FirstClauseMinWords: 3, MaxChars: 200}
}

// Chunker turns LLM text deltas into speakable chunks.
type Chunker struct {
	cfg Config
	// buf holds the filtered text not yet emitted; it never starts with
	// ASCII white space (that is dropped as it arrives at the front).
	buf []byte
	// scan is how far into buf every position is known not to be a cut.
	scan int
	// first is true until the first non-empty chunk has been emitted.
	first bool
	// lineStart is true when buf begins a new line (list markers like
	// "1." are not sentence ends there).
	lineStart bool
	// words counts the words in buf[:wordsAt]; inWord says whether a
	// counted word is still open there. Kept so clause checks stay linear.
	wordsAt, words int
	inWord         bool
}

// New returns a Chunker.
func New(cfg Config) *Chunker {
	c := &Chunker{cfg: cfg}
	c.Reset()
	return c
}

// Reset forgets all pending text and starts a new answer.
func (c *Chunker) Reset() {
	c.buf = c.buf[:0]
	c.scan, c.wordsAt, c.words, c.inWord = 0, 0, 0, false
	c.first = true
	c.lineStart = true
}

// Push adds the next LLM delta and returns the chunks it completed (zero
// or more).
func (c *Chunker) Push(delta string) []string {
	for i := 0; i < len(delta); i++ {
		switch b := delta[i]; b {
		case '*', '#', '`', '_':
			// Markdown emphasis, headings and code: a TTS reads them as
			// "asterisk", "hash", "underscore", or garbles them. Bytes below 0x80 never
			// occur inside a multi-byte UTF-8 sequence, so filtering bytes
			// is safe and independent of where deltas split.
		default:
			c.buf = append(c.buf, b)
		}
	}
	var out []string
	base := c.buf[:0] // the backing array's start: cuts reslice, one copy at the end
	for {
		end, next, ok := c.nextCut()
		if !ok {
			break
		}
		if s := clean(c.buf[:end]); s != "" {
			out = append(out, s)
			c.first = false
		}
		c.lineStart = false
		c.buf = c.buf[next:]
		c.scan, c.wordsAt, c.words, c.inWord = 0, 0, 0, false
	}
	c.buf = base[:copy(base[:len(c.buf)], c.buf)]
	return out
}

// Flush returns whatever is left as one chunk ("" if nothing speakable)
// and resets the Chunker for the next answer.
func (c *Chunker) Flush() string {
	c.dropLeadingSpace()
	s := clean(c.buf)
	c.Reset()
	return s
}

// decision is what the text so far says about one position.
type decision int

const (
	notCut decision = iota
	cut
	wait // the answer depends on text that has not arrived
)

// nextCut finds the next cut in buf: the chunk is buf[:end] and the text
// after it starts at next. ok is false when no cut is decided yet.
func (c *Chunker) nextCut() (end, next int, ok bool) {
	c.dropLeadingSpace()
	buf := c.buf
	limit := len(buf)
	if c.cfg.MaxChars > 0 {
		limit = min(limit, c.cfg.MaxChars+1)
	}
	i := c.scan
	for i < limit {
		r, size := utf8.DecodeRune(buf[i:])
		if r == utf8.RuneError && !utf8.FullRune(buf[i:]) {
			c.scan = i
			return 0, 0, false // half a character: wait for the rest
		}
		d, after := notCut, i+size
		switch r {
		case '\n':
			// A line break ends a chunk: paragraphs, list items, headings.
			// The break itself stays, so the next chunk knows it starts a line.
			return i, i, true
		case '.', '!', '?':
			d, after = c.sentenceEnd(i)
		case '。', '！', '？':
			d, after = closeRun(buf, after, true)
		case ',', ';', ':':
			if c.first {
				d = c.clauseEnd(i, after, true)
			}
		case '，', '；', '：', '、', '—':
			if c.first {
				d = c.clauseEnd(i, after, false)
			}
		}
		switch d {
		case cut:
			return after, after, true
		case wait:
			c.scan = i
			return 0, 0, false
		}
		i += size
	}
	c.scan = i
	if c.cfg.MaxChars <= 0 || len(buf) <= c.cfg.MaxChars {
		return 0, 0, false
	}
	// No boundary in the first MaxChars bytes: cut at the last space
	// inside the limit, or failing that (one enormous word) the first after.
	for k := c.cfg.MaxChars; k > 0; k-- {
		if isSpace(buf[k]) {
			return k, k + 1, true
		}
	}
	for k := max(c.cfg.MaxChars+1, c.scan); k < len(buf); k++ {
		if isSpace(buf[k]) {
			return k, k + 1, true
		}
	}
	c.scan = len(buf) // searched: the next push resumes here
	return 0, 0, false
}

// dropLeadingSpace removes white space at the front of buf, noting line
// breaks.
func (c *Chunker) dropLeadingSpace() {
	n := 0
	for n < len(c.buf) && isSpace(c.buf[n]) {
		if c.buf[n] == '\n' {
			c.lineStart = true
		}
		n++
	}
	if n > 0 {
		// Only reached with scan and wordsAt at 0: a cut or a fresh buffer.
		c.buf = c.buf[n:]
	}
}

// sentenceEnd decides whether the . ! or ? at buf[i] ends a sentence, and
// where the chunk would end (after any run of terminators and closing
// quotes or brackets).
func (c *Chunker) sentenceEnd(i int) (decision, int) {
	buf := c.buf
	if buf[i] == '.' {
		if i > 0 && (buf[i-1] == '.' || buf[i-1] == '!' || buf[i-1] == '?') {
			return notCut, 0 // inside "..." or "?." (the run's first mark decides)
		}
		if i+1 == len(buf) {
			return wait, 0
		}
		switch next := buf[i+1]; {
		case next == '.':
			return notCut, 0 // an ellipsis: a pause, not an end
		case next >= '0' && next <= '9':
			return notCut, 0 // 3.14, .5, v1.2
		}
		if c.noEndBefore(i) {
			return notCut, 0
		}
	} else if i > 0 && (buf[i-1] == '!' || buf[i-1] == '?') {
		return notCut, 0 // "?!": the first mark of the run decides
	}
	d, after := closeRun(buf, i+1, false)
	if d != cut || buf[i] != '.' {
		return d, after
	}
	// A period followed by a lower-case word is an abbreviation the list
	// does not know ("Corp. and", "approx. ten"). Looking one word ahead
	// costs nothing in practice: tokenizers glue the space to the next word.
	for k := after; k < len(buf); {
		if buf[k] == '\n' {
			return cut, after // a line break ends it whatever follows
		}
		if isSpace(buf[k]) {
			k++
			continue
		}
		if !utf8.FullRune(buf[k:]) {
			return wait, 0
		}
		if r, _ := utf8.DecodeRune(buf[k:]); unicode.IsLower(r) {
			return notCut, 0
		}
		return cut, after
	}
	return wait, 0
}

// closeRun extends a sentence end over following terminators and closing
// quotes or brackets, then requires white space (or, for CJK marks, a
// character that is not a closer): buf[from:] is what follows the mark.
func closeRun(buf []byte, from int, cjk bool) (decision, int) {
	j := from
	for j < len(buf) {
		r, size := utf8.DecodeRune(buf[j:])
		if r == utf8.RuneError && !utf8.FullRune(buf[j:]) {
			return wait, 0
		}
		if !isCloser(r) && r != '!' && r != '?' && r != '.' && r != '！' && r != '？' && r != '。' {
			if cjk || isSpace(buf[j]) {
				return cut, j
			}
			return notCut, 0 // "example.com", "Yahoo!Mail"
		}
		j += size
	}
	return wait, 0
}

func isCloser(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '”', '’', '»', '」', '』', '）':
		return true
	}
	return false
}

// clauseEnd decides whether the clause mark at buf[i] (ending at after)
// ends the first chunk. ASCII marks need white space after them (1,000 and
// 3:30 are numbers); the CJK ones and the em dash stand alone.
func (c *Chunker) clauseEnd(i, after int, needSpace bool) decision {
	if needSpace {
		if after == len(c.buf) {
			return wait
		}
		if !isSpace(c.buf[after]) {
			return notCut
		}
	}
	if c.countWords(i) < c.cfg.FirstClauseMinWords {
		return notCut
	}
	return cut
}

// abbreviations end in a period but do not end sentences (lower case,
// without the final period). Dotted forms such as "e.g", "u.s" are also
// caught by the single-letter pattern in noEndBefore.
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true,
	"jr": true, "sr": true, "vs": true, "etc": true, "approx": true, "mt": true,
	"ave": true, "fig": true, "e.g": true, "i.e": true, "u.s": true,
	"a.m": true, "p.m": true, "cf": true, "ca": true,
}

// noEndBefore reports whether the word before the period at buf[i] keeps
// the period from ending a sentence: an abbreviation, an initial ("J."),
// dotted letters ("U.S.", "e.g."), or a list number at the start of a line.
func (c *Chunker) noEndBefore(i int) bool {
	const longest = 16 // longer words are not abbreviations, initials or list numbers
	start := i
	for start > 0 && !isSpace(c.buf[start-1]) {
		if i-start == longest {
			return false
		}
		start--
	}
	word := c.buf[start:i]
	for len(word) > 0 && strings.ContainsRune("\"'([{“‘«", rune(word[0])) {
		word = word[1:]
	}
	if len(word) == 0 {
		return false
	}
	if abbreviations[strings.ToLower(string(word))] {
		return true
	}
	if dottedLetters(word) {
		return true
	}
	if len(word) == 1 && word[0] >= 'A' && word[0] <= 'Z' && word[0] != 'I' {
		return true // an initial: "J. R. R. Tolkien"
	}
	if allDigits(word) && c.lineStart {
		for _, b := range c.buf[:start] {
			if !isSpace(b) {
				return false
			}
		}
		return true // "1. " starting a list item
	}
	return false
}

// dottedLetters reports whether w looks like "u.s" or "e.g": single
// letters joined by periods.
func dottedLetters(w []byte) bool {
	if len(w) < 3 {
		return false
	}
	for k, b := range w {
		letter := (b|0x20) >= 'a' && (b|0x20) <= 'z'
		if k%2 == 0 && !letter || k%2 == 1 && b != '.' {
			return false
		}
	}
	return len(w)%2 == 1
}

func allDigits(w []byte) bool {
	for _, b := range w {
		if b < '0' || b > '9' {
			return false
		}
	}
	return len(w) > 0
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\v' || b == '\f'
}

// countWords counts the white-space separated tokens in buf[:end] that
// hold a letter or digit, continuing from the last count (end only grows
// between cuts).
func (c *Chunker) countWords(end int) int {
	for c.wordsAt < end {
		r, size := utf8.DecodeRune(c.buf[c.wordsAt:end])
		c.wordsAt += size
		switch {
		case r < utf8.RuneSelf && isSpace(byte(r)):
			c.inWord = false
		case !c.inWord && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			c.words++
			c.inWord = true
		}
	}
	return c.words
}

// clean turns a raw chunk into what the TTS gets: valid UTF-8, white space
// collapsed, a leading bullet removed; "" if nothing speakable is left.
// It allocates only the returned string.
func clean(b []byte) string {
	b = bytes.TrimSpace(b)
	for _, bullet := range [...]string{"- ", "+ ", "• ", "> "} {
		if bytes.HasPrefix(b, []byte(bullet)) {
			b = bytes.TrimLeft(b[len(bullet):], " \t")
			break
		}
	}
	speakable := false
	for rest := b; len(rest) > 0 && !speakable; {
		r, size := utf8.DecodeRune(rest)
		speakable = unicode.IsLetter(r) || unicode.IsDigit(r)
		rest = rest[size:]
	}
	if !speakable {
		return ""
	}
	var sb strings.Builder
	sb.Grow(len(b))
	space := false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			// an invalid byte: dropped
		case r < utf8.RuneSelf && isSpace(byte(r)):
			space = true
		default:
			if space && sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			space = false
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}
