package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// charClass is a regex bracket expression such as [A-Za-z]: sorted
// inclusive code point ranges.
type charClass [][2]rune

// parseClass reads the inside of a bracket expression made of single
// characters and lo-hi ranges (no escapes: the classes below have none).
func parseClass(spec string) charClass {
	var runes []rune
	for _, r := range spec {
		runes = append(runes, r)
	}
	var c charClass
	for i := 0; i < len(runes); i++ {
		lo, hi := runes[i], runes[i]
		if i+2 < len(runes) && runes[i+1] == '-' {
			hi = runes[i+2]
			i += 2
		}
		c = append(c, [2]rune{lo, hi})
	}
	return c
}

// has reports whether r is in the class as llama.cpp's std::wregex sees
// it: non-ASCII whitespace was replaced by U+000B before matching, so it
// is never in a class that lacks U+000B.
func (c charClass) has(r rune) bool {
	if r > utf8.RuneSelf && isSpace(r) {
		return false
	}
	for _, rg := range c {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}

// The classes of DeepSeek's pre-tokenizer regexes, as llama.cpp lists them.
var (
	// deepseekLetters is DeepSeek LLM's list of cased letters.
	deepseekLetters = parseClass("A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃")
	// deepseekPunct is DeepSeek LLM's ASCII and full-width punctuation
	// (":-~" spans the ASCII letters too).
	deepseekPunct = parseClass("!-/:-~！-／：-～‘-‟\u3000-。")
	// deepseekCJK is the CJK and Hangul block of both DeepSeek regexes.
	deepseekCJK = parseClass("一-龥ࠀ-一가-\uD7FF")
)

// spaceThen matches \s?X+ at i, where X is the predicate in.
func spaceThen(s []rune, i int, in func(rune) bool) int {
	j := i
	if isSpace(s[j]) && j+1 < len(s) && in(s[j+1]) {
		j++
	}
	if !in(s[j]) {
		return i
	}
	return runWhile(s, j, in)
}

// splitEachNewline is [\r\n].
func splitEachNewline(s []rune) []int {
	return matchSplit(s, func(s []rune, i int) int {
		if isNewline(s[i]) {
			return i + 1
		}
		return i
	})
}

// splitSpaceThen returns the stage \s?X+ for the predicate in.
func splitSpaceThen(in func(rune) bool) func([]rune) []int {
	return func(s []rune) []int {
		return matchSplit(s, func(s []rune, i int) int { return spaceThen(s, i, in) })
	}
}

// splitRun returns the stage X+ for the predicate in.
func splitRun(in func(rune) bool) func([]rune) []int {
	return func(s []rune) []int {
		return matchSplit(s, func(s []rune, i int) int { return runWhile(s, i, in) })
	}
}

// splitTrailingSpaces is \s+$: the whitespace that ends a segment.
func splitTrailingSpaces(s []rune) []int {
	k := len(s)
	for k > 0 && isSpace(s[k-1]) {
		k--
	}
	if k == 0 || k == len(s) {
		return []int{len(s)}
	}
	return []int{k, len(s)}
}

// deepseekLLMStages are DeepSeek LLM's regexes:
// [\r\n], \s?[letters]+, \s?[punct]+, \s+$, [CJK]+, \p{N}+.
var deepseekLLMStages = []func([]rune) []int{
	splitEachNewline,
	splitSpaceThen(deepseekLetters.has),
	splitSpaceThen(deepseekPunct.has),
	splitTrailingSpaces,
	splitRun(deepseekCJK.has),
	splitDigitRun,
}

// deepseekCoderStages are DeepSeek Coder's regexes:
// [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}.
var deepseekCoderStages = []func([]rune) []int{
	splitEachNewline,
	splitSpaceThen(isLetter),
	splitSpaceThen(isPunct),
	splitRun(deepseekCJK.has),
	splitEachDigit,
}

func isPunct(r rune) bool { return unicode.IsPunct(r) }
