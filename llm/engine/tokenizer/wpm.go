package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// wordStart is the phantom space that marks a word's first piece in a
// WordPiece vocabulary as llama.cpp's converter writes it ("##" pieces
// lose their prefix, word starts gain ▁).
const wordStart = "▁"

// encodeWPM runs llama.cpp's WordPiece on raw text: each word is covered
// left to right by the longest vocabulary entries; a word that cannot be
// covered becomes the unknown token.
func (t *Tokenizer) encodeWPM(text string, out []int32) []int32 {
	for _, word := range wpmWords(text) {
		w := wordStart + word
		start := len(out)
		for i := 0; i < len(w); {
			j := min(len(w), i+t.maxTokenLen)
			for ; j > i; j-- {
				if id, ok := t.ids[w[i:j]]; ok {
					out = append(out, id)
					break
				}
			}
			if j == i { // no piece starts here: the whole word is unknown
				out = out[:start]
				break
			}
			i = j
		}
		if len(out) == start && t.unk != none {
			out = append(out, t.unk)
		}
	}
	return out
}

// wpmWords is BERT's basic pre-tokenization as llama.cpp does it: each code
// point reduced to the first of its NFD decomposition and lower-cased;
// whitespace separates words; control characters, NUL and U+FFFD vanish;
// punctuation, ASCII symbols and CJK ideographs stand alone.
func wpmWords(text string) []string {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range text {
		r = nfdBase(r)
		switch {
		case isSpace(r):
			flush()
		case r == 0 || r == utf8.RuneError || isOtherCategory(r):
		case unicode.IsPunct(r) || (r < 0x7F && unicode.IsSymbol(r)) || isCJKIdeograph(r):
			flush()
			words = append(words, string(unicode.ToLower(r)))
		default:
			cur.WriteRune(unicode.ToLower(r))
		}
	}
	flush()
	return words
}

// nfdBase is the first code point of r's canonical decomposition.
func nfdBase(r rune) rune {
	if r < utf8.RuneSelf {
		return r
	}
	var buf [utf8.UTFMax]byte
	d := norm.NFD.Append(nil, buf[:utf8.EncodeRune(buf[:], r)]...)
	first, _ := utf8.DecodeRune(d)
	return first
}

// isOtherCategory is Unicode's C categories (control, format, surrogate,
// private use).
func isOtherCategory(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co)
}

// isCJKIdeograph is BERT's list of CJK ideograph blocks (with the
// 0x2B920 lower bound of Hugging Face's implementation, which llama.cpp
// follows).
func isCJKIdeograph(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
