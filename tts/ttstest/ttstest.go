// Package ttstest holds helpers shared by the tests and benchmarks of speech
// synthesis backends (tts/flite, tts/espeak): a collector for one Synthesize
// call, the word-mark checks, shared texts and the latency benchmark.
package ttstest

import (
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/voxpipe/voxpipe/tts"
)

// Sentence is a plain 16-word sentence.
const Sentence = "The weather today is sunny with a light breeze, perfect for a walk in the park."

// MarksText has punctuation, a repeated word and a number that engines speak
// as several words.
const MarksText = `Hello, hello! The test, the "real" test, costs 1234 points; it works.`

// Result is what one Synthesize call produced.
type Result struct {
	Chunks  []tts.Chunk
	Samples int
	Err     error
}

// Synthesize runs one synthesis, reading every chunk as it comes.
func Synthesize(ctx context.Context, s tts.Synthesizer, text string) Result {
	out := make(chan tts.Chunk)
	errc := make(chan error, 1)
	go func() { errc <- s.Synthesize(ctx, text, out) }()
	var r Result
	for {
		select {
		case c := <-out:
			r.Chunks = append(r.Chunks, c)
			r.Samples += len(c.PCM)
		case r.Err = <-errc:
			return r
		}
	}
}

// IsWordRune reports whether r belongs to a word (a letter or a number).
func IsWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// CheckMarks verifies the word marks of r against text: every mark inside
// its chunk, EndSample monotonic, TextEnd ascending and at the end of a
// word, the last one after the text's last word. It returns all marks in
// order.
func CheckMarks(t testing.TB, text string, r Result) []tts.WordMark {
	t.Helper()
	var all []tts.WordMark
	chunkStart := 0
	for i, c := range r.Chunks {
		if len(c.PCM) == 0 {
			t.Errorf("chunk %d is empty", i)
		}
		chunkEnd := chunkStart + len(c.PCM)
		for _, m := range c.Words {
			if m.EndSample <= chunkStart || m.EndSample > chunkEnd {
				t.Errorf("mark %+v outside its chunk (%d, %d]", m, chunkStart, chunkEnd)
			}
			if n := len(all); n > 0 {
				if m.EndSample < all[n-1].EndSample {
					t.Errorf("EndSample goes back: %+v after %+v", m, all[n-1])
				}
				if m.TextEnd <= all[n-1].TextEnd {
					t.Errorf("TextEnd not ascending: %+v after %+v", m, all[n-1])
				}
			}
			if m.TextEnd <= 0 || m.TextEnd > len(text) {
				t.Fatalf("TextEnd %d outside text of %d bytes", m.TextEnd, len(text))
			}
			last, _ := utf8.DecodeLastRuneInString(text[:m.TextEnd])
			next, _ := utf8.DecodeRuneInString(text[m.TextEnd:])
			// Han text has no spaces: every character is a word.
			if !IsWordRune(last) || IsWordRune(next) && !unicode.Is(unicode.Han, next) {
				t.Errorf("TextEnd %d is not at the end of a word: %q|%q", m.TextEnd, text[:m.TextEnd], text[m.TextEnd:])
			}
			all = append(all, m)
		}
		chunkStart = chunkEnd
	}
	if len(all) == 0 {
		t.Fatal("no word marks")
	}
	lastWord := strings.LastIndexFunc(text, IsWordRune)
	_, size := utf8.DecodeRuneInString(text[lastWord:])
	lastWord += size
	if got := all[len(all)-1].TextEnd; got != lastWord {
		t.Errorf("last TextEnd = %d (%q), want %d (%q)", got, text[:got], lastWord, text[:lastWord])
	}
	return all
}

// MarkedWords cuts text at each mark's TextEnd and returns the pieces with
// their leading non-word characters removed: the words the marks stand for.
func MarkedWords(text string, marks []tts.WordMark) []string {
	var words []string
	prev := 0
	for _, m := range marks {
		words = append(words, strings.TrimLeftFunc(text[prev:m.TextEnd], func(r rune) bool { return !IsWordRune(r) }))
		prev = m.TextEnd
	}
	return words
}
