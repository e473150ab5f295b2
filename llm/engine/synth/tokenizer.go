package synth

import (
	"fmt"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// Special tokens, appended after the byte and merged tokens (ids vocab-3 … vocab-1).
const (
	TokenEndOfText = "<|endoftext|>"
	TokenIMStart   = "<|im_start|>"
	TokenIMEnd     = "<|im_end|>"
)

// ChatTemplate is the ChatML template stored as tokenizer.chat_template (the Qwen2 / SmolLM2 form).
const ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// ggml token types (llama_token_type).
const (
	tokenNormal  = 1
	tokenControl = 3
)

// byteRunes is GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the
// others are moved to U+0100 upwards, so every byte has a visible single-rune token (space → Ġ).
func byteRunes() [256]rune {
	var t [256]rune
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			t[b] = rune(b)
		} else {
			t[b] = next
			next++
		}
	}
	return t
}

// Vocabulary builds a GPT-2 style byte-level BPE vocabulary of exactly size tokens: the 256 byte
// tokens (id = byte value), then merged tokens, then the three ChatML specials. Merged tokens are
// words over a small alphabet grown one letter at a time: level 1 joins a word-initial symbol
// (Ġ = space, or a–z) with a letter, each later level appends a letter to a token of the previous
// level. Every merge "left right" joins two existing tokens into one that exists, so the merges
// list is consistent and ranks are the generation order.
func Vocabulary(size int) (tokens []string, types []int32, merges []string, err error) {
	const specials = 3
	nMerges := size - 256 - specials
	if nMerges < 0 {
		return nil, nil, nil, fmt.Errorf("synth: vocabulary of %d tokens is below the %d byte and special tokens", size, 256+specials)
	}
	br := byteRunes()
	tokens = make([]string, 0, size)
	types = make([]int32, 0, size)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(br[b]))
		types = append(types, tokenNormal)
	}
	letters := make([]string, 0, 26)
	for c := 'a'; c <= 'z'; c++ {
		letters = append(letters, string(c))
	}
	level := append([]string{string(br[' '])}, letters...)
	merges = make([]string, 0, nMerges)
	for len(merges) < nMerges {
		var next []string
		for _, left := range level {
			for _, right := range letters {
				if len(merges) == nMerges {
					break
				}
				merges = append(merges, left+" "+right)
				tokens = append(tokens, left+right)
				types = append(types, tokenNormal)
				next = append(next, left+right)
			}
		}
		level = next
	}
	tokens = append(tokens, TokenEndOfText, TokenIMStart, TokenIMEnd)
	types = append(types, tokenControl, tokenControl, tokenControl)
	return tokens, types, merges, nil
}

func setTokenizer(w *gguf.Writer, s Shape) error {
	tokens, types, merges, err := Vocabulary(s.Vocab)
	if err != nil {
		return err
	}
	eot := uint32(s.Vocab - 3)
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", s.Pre)
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", merges)
	w.Set("tokenizer.ggml.bos_token_id", eot)
	w.Set("tokenizer.ggml.eos_token_id", uint32(s.Vocab-1)) // <|im_end|>, as in chat-tuned Qwen2.5
	w.Set("tokenizer.ggml.padding_token_id", eot)
	w.Set("tokenizer.ggml.add_bos_token", s.AddBOS)
	w.Set("tokenizer.chat_template", ChatTemplate)
	return nil
}
