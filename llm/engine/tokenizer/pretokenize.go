package tokenizer

import (
	"fmt"
	"unicode"
)

// preTokenizer splits raw text into words before BPE. Each stage stands for
// one regex of llama.cpp's list for the pre-tokenizer; a later stage splits
// every segment of the previous one, and text a regex does not match stays a
// segment of its own (llama.cpp's unicode_regex_split). Go's regexp has no
// lookahead, so every regex is hand-written; each function names its regex.
type preTokenizer struct {
	name   string
	stages []func([]rune) []int // returns segment end offsets (in runes)
}

// preTokenizerFor maps tokenizer.ggml.pre to llama.cpp's regexes, and returns
// whether merges are skipped for whole-word tokens and the add-BOS default.
func preTokenizerFor(name string) (p preTokenizer, ignoreMerges, addBOS bool, err error) {
	p.name = name
	switch name {
	case "", "default":
		p.stages = []func([]rune) []int{splitPunctRun, splitGPT2, splitDigitRun, splitThreeASCIIDigits}
	case "gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "olmo", "jais", "mpt":
		p.stages = []func([]rune) []int{splitGPT2}
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral":
		p.stages = []func([]rune) []int{func(r []rune) []int { return splitLlama3(r, 3) }}
		return p, true, true, nil
	case "qwen2", "deepseek-r1-qwen", "megrez", "hunyuan":
		p.stages = []func([]rune) []int{func(r []rune) []int { return splitLlama3(r, 1) }}
	case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva", "minerva-7b":
		p.stages = []func([]rune) []int{splitEachDigit, splitGPT2}
	case "falcon":
		p.stages = []func([]rune) []int{splitFalconPunctRun, splitGPT2, splitThreeASCIIDigits}
	case "deepseek-llm":
		p.stages = deepseekLLMStages
	case "deepseek-coder":
		p.stages = deepseekCoderStages
	default:
		return p, false, false, fmt.Errorf("%w: tokenizer.ggml.pre = %q (supported: default, gpt2, llama-bpe, qwen2, smollm, falcon, deepseek-llm, deepseek-coder and aliases)", ErrPre, name)
	}
	return p, false, false, nil
}

// split returns the words of text.
func (p preTokenizer) split(text string) []string {
	if text == "" {
		return nil
	}
	segs := [][]rune{[]rune(text)}
	for _, stage := range p.stages {
		var next [][]rune
		for _, seg := range segs {
			start := 0
			for _, end := range stage(seg) {
				next = append(next, seg[start:end])
				start = end
			}
		}
		segs = next
	}
	words := make([]string, len(segs))
	for i, s := range segs {
		words[i] = string(s)
	}
	return words
}

func isLetter(r rune) bool  { return unicode.IsLetter(r) }
func isNumber(r rune) bool  { return unicode.IsNumber(r) }
func isSpace(r rune) bool   { return unicode.IsSpace(r) }
func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// matchSplit cuts s at every leftmost non-overlapping match of match (which
// returns the end of a match at i, or i for none); gaps become segments.
func matchSplit(s []rune, match func(s []rune, i int) int) []int {
	var ends []int
	gap := 0
	for i := 0; i < len(s); {
		end := match(s, i)
		if end <= i {
			i++
			continue
		}
		if gap < i {
			ends = append(ends, i)
		}
		ends = append(ends, end)
		i, gap = end, end
	}
	if gap < len(s) {
		ends = append(ends, len(s))
	}
	return ends
}

func runWhile(s []rune, i int, pred func(rune) bool) int {
	for i < len(s) && pred(s[i]) {
		i++
	}
	return i
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i (anyCase: [sS] etc).
func contraction(s []rune, i int, anyCase bool) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return i
	}
	lower := func(r rune) rune {
		if anyCase {
			return unicode.ToLower(r)
		}
		return r
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v', 'l':
		if i+2 < len(s) {
			want := map[rune]rune{'r': 'e', 'v': 'e', 'l': 'l'}[lower(s[i+1])]
			if lower(s[i+2]) == want {
				return i + 3
			}
		}
	}
	return i
}

// trailingSpaces matches \s+(?!\S)|\s+ at i, given s[i] is whitespace: a run
// of whitespace leaves its last character to prefix the next word.
func trailingSpaces(s []rune, i int) int {
	e := runWhile(s, i, isSpace)
	if e < len(s) && e-i >= 2 {
		return e - 1
	}
	return e
}

// splitGPT2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// (an unmatched lone whitespace becomes its own segment, as \s+ would give).
func splitGPT2(s []rune) []int {
	return matchSplit(s, func(s []rune, i int) int {
		if e := contraction(s, i, false); e > i {
			return e
		}
		j := i
		if s[j] == ' ' && j+1 < len(s) {
			j++
		}
		switch {
		case isLetter(s[j]):
			return runWhile(s, j, isLetter)
		case isNumber(s[j]):
			return runWhile(s, j, isNumber)
		case isOther(s[j]):
			return runWhile(s, j, isOther)
		}
		return trailingSpaces(s, i)
	})
}

// splitLlama3 is Llama 3's
// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and, with maxDigits 1, Qwen2's (\p{N} instead of \p{N}{1,3}).
func splitLlama3(s []rune, maxDigits int) []int {
	return matchSplit(s, func(s []rune, i int) int {
		if e := contraction(s, i, true); e > i {
			return e
		}
		c := s[i]
		if isLetter(c) {
			return runWhile(s, i, isLetter)
		}
		if !isNewline(c) && !isNumber(c) && i+1 < len(s) && isLetter(s[i+1]) {
			return runWhile(s, i+1, isLetter)
		}
		if isNumber(c) {
			e := i
			for e < len(s) && e-i < maxDigits && isNumber(s[e]) {
				e++
			}
			return e
		}
		j := i
		if c == ' ' && j+1 < len(s) && isOther(s[j+1]) {
			j++
		}
		if isOther(s[j]) {
			e := runWhile(s, j, isOther)
			return runWhile(s, e, isNewline)
		}
		if isSpace(c) {
			e := runWhile(s, i, isSpace)
			for k := e - 1; k >= i; k-- {
				if isNewline(s[k]) {
					return k + 1 // \s*[\r\n]+
				}
			}
			return trailingSpaces(s, i)
		}
		return i + 1
	})
}

// splitEachDigit is \p{N}.
func splitEachDigit(s []rune) []int {
	return matchSplit(s, func(s []rune, i int) int {
		if isNumber(s[i]) {
			return i + 1
		}
		return i
	})
}

// splitDigitRun is \p{N}+.
func splitDigitRun(s []rune) []int {
	return matchSplit(s, func(s []rune, i int) int { return runWhile(s, i, isNumber) })
}

// splitThreeASCIIDigits is [0-9][0-9][0-9].
func splitThreeASCIIDigits(s []rune) []int {
	return matchSplit(s, func(s []rune, i int) int {
		if i+3 <= len(s) && isASCIIDigit(s[i]) && isASCIIDigit(s[i+1]) && isASCIIDigit(s[i+2]) {
			return i + 3
		}
		return i
	})
}

func isASCIIDigit(r rune) bool { return r >= '0' && r <= '9' }

// splitPunctRun is [\p{P}\$\+<=>\^~\|]+.
var splitPunctRun = splitRun(func(r rune) bool {
	return unicode.IsPunct(r) || r == '$' || r == '+' || r == '<' || r == '=' || r == '>' || r == '^' || r == '~' || r == '|'
})

// splitFalconPunctRun is Falcon's [\p{P}\$\+<=>\^~\|`]+ (the default's with a backtick).
var splitFalconPunctRun = splitRun(func(r rune) bool {
	return unicode.IsPunct(r) || r == '$' || r == '+' || r == '<' || r == '=' || r == '>' || r == '^' || r == '~' || r == '|' || r == '`'
})
