// Package tokenizer implements llama.cpp's tokenizers from GGUF metadata:
// SentencePiece-style "llama" (score-driven merges, byte fallback) and
// byte-level BPE "gpt2" (merge ranks, with the pre-tokenizer named by
// tokenizer.ggml.pre) and WordPiece "bert". Encoding and decoding follow
// llama.cpp token for token (testdata/llamacpp holds its reference ids).
package tokenizer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// Token types as stored in tokenizer.ggml.token_type (llama_token_type).
const (
	typeUndefined   = 0
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

type kind int

const (
	kindSPM kind = iota
	kindBPE
	kindWPM
)

// none marks an absent special token id.
const none int32 = -1

// Tokenizer encodes text to token ids and back. It is immutable after
// FromGGUF and safe for concurrent use.
type Tokenizer struct {
	kind   kind
	tokens []string // vocabulary text as stored
	types  []int32
	scores []float32
	pieces []string // decoded bytes of each token (Piece)
	ids    map[string]int32

	// bpe: merge rank by (left id, right id)
	ranks        map[uint64]int32
	pre          preTokenizer
	ignoreMerges bool

	bos, eos, eot, eom, unk, pad int32
	sep                          int32 // WordPiece: appended by Encode with addSpecial
	maxTokenLen                  int   // WordPiece: longest vocabulary entry in bytes
	addBOS, addEOS               bool
	addSpacePrefix               bool
	eog                          []bool  // by id: ends generation
	specials                     []int32 // control/user-defined/unknown tokens, longest text first
	byteTokens                   [256]int32
}

// eogTexts are end-of-generation markers llama.cpp recognises by text.
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>"}

// FromGGUF builds the tokenizer described by f's tokenizer.ggml.* metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return nil, ErrNoVocab
	}
	model, _ := f.String("tokenizer.ggml.model")
	t := &Tokenizer{tokens: tokens, ids: make(map[string]int32, len(tokens)), eog: make([]bool, len(tokens)), sep: none}
	n := len(tokens)
	switch model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk, t.eot, t.eom, t.pad = 1, 2, 0, none, none, none
		t.addBOS, t.addSpacePrefix = true, true
	case "gpt2":
		t.kind = kindBPE
		t.bos, t.eos, t.unk, t.eot, t.eom, t.pad = 11, 11, none, none, none, none
		preName, _ := f.String("tokenizer.ggml.pre")
		pre, ignoreMerges, addBOS, err := preTokenizerFor(preName)
		if err != nil {
			return nil, err
		}
		t.pre, t.ignoreMerges, t.addBOS = pre, ignoreMerges, addBOS
	case "bert":
		t.kind = kindWPM
		t.bos, t.eos, t.unk, t.eot, t.eom, t.pad, t.sep = 101, none, 100, none, none, 0, 102
		t.addBOS = true
	default:
		return nil, fmt.Errorf("%w: %q (want \"llama\", \"gpt2\" or \"bert\")", ErrModel, model)
	}

	if types, ok := f.Int32s("tokenizer.ggml.token_type"); ok {
		if len(types) != n {
			return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrMetadata, len(types), n)
		}
		t.types = types
	} else {
		t.types = make([]int32, n)
		for i := range t.types {
			t.types[i] = typeNormal
		}
	}
	if scores, ok := f.Float32s("tokenizer.ggml.scores"); ok {
		if len(scores) != n {
			return nil, fmt.Errorf("%w: %d scores for %d tokens", ErrMetadata, len(scores), n)
		}
		t.scores = scores
	} else {
		t.scores = make([]float32, n)
	}
	for i, s := range tokens {
		if _, dup := t.ids[s]; !dup {
			t.ids[s] = int32(i)
		}
		t.maxTokenLen = max(t.maxTokenLen, len(s))
	}

	readID := func(key string, dst *int32) error {
		v, ok := f.Uint(key)
		if !ok {
			return nil
		}
		if v == 0xFFFFFFFF || v == 0xFFFFFFFFFFFFFFFF {
			*dst = none // llama.cpp's "no token"
			return nil
		}
		if v >= uint64(n) {
			return fmt.Errorf("%w: %s = %d is outside the %d-token vocabulary", ErrMetadata, key, v, n)
		}
		*dst = int32(v)
		return nil
	}
	for key, dst := range map[string]*int32{
		"tokenizer.ggml.bos_token_id":       &t.bos,
		"tokenizer.ggml.eos_token_id":       &t.eos,
		"tokenizer.ggml.eot_token_id":       &t.eot,
		"tokenizer.ggml.eom_token_id":       &t.eom,
		"tokenizer.ggml.unknown_token_id":   &t.unk,
		"tokenizer.ggml.padding_token_id":   &t.pad,
		"tokenizer.ggml.seperator_token_id": &t.sep, // sic: llama.cpp's key
	} {
		if err := readID(key, dst); err != nil {
			return nil, err
		}
	}
	for _, id := range []*int32{&t.bos, &t.eos, &t.unk, &t.sep} {
		if *id >= int32(n) {
			*id = none // defaults that do not fit a small vocabulary
		}
	}
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		t.addBOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		t.addEOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok && t.kind == kindSPM {
		t.addSpacePrefix = b
	}

	if t.kind == kindBPE {
		merges, _ := f.Strings("tokenizer.ggml.merges")
		t.ranks = make(map[uint64]int32, len(merges))
		for rank, m := range merges {
			// Like llama.cpp, look for the separator from the second byte on.
			sp := -1
			if len(m) > 1 {
				sp = strings.IndexByte(m[1:], ' ')
			}
			if sp < 0 {
				return nil, fmt.Errorf("%w: merge %d %q has no space", ErrMetadata, rank, m)
			}
			sp++
			l, lok := t.ids[m[:sp]]
			r, rok := t.ids[m[sp+1:]]
			if !lok || !rok {
				continue // llama.cpp keeps such merges but they can never apply
			}
			key := pairKey(l, r)
			if _, seen := t.ranks[key]; !seen {
				t.ranks[key] = int32(rank)
			}
		}
	}

	t.pieces = make([]string, n)
	for i := range tokens {
		t.pieces[i] = t.decodePiece(int32(i))
	}
	for b := 0; b < 256; b++ {
		t.byteTokens[b] = t.lookupByte(byte(b))
	}

	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != none {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok && (t.types[id] == typeControl || t.types[id] == typeUserDefined) {
			t.eog[id] = true
		}
	}
	for id, typ := range t.types {
		if (typ == typeControl || typ == typeUserDefined || typ == typeUnknown) && tokens[id] != "" {
			t.specials = append(t.specials, int32(id))
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool {
		return len(tokens[t.specials[i]]) > len(tokens[t.specials[j]])
	})
	return t, nil
}

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// decodePiece renders a token as llama.cpp's token_to_piece does with
// special=false: control and unknown tokens render as "", SPM's ▁ becomes a
// space, byte tokens become their byte, BPE text maps back through the
// GPT-2 byte↔unicode table.
func (t *Tokenizer) decodePiece(id int32) string {
	text := t.tokens[id]
	switch t.types[id] {
	case typeUserDefined:
		return text
	case typeNormal:
		if t.kind != kindBPE {
			return strings.ReplaceAll(text, "▁", " ")
		}
		return decodeByteLevel(text)
	case typeByte:
		if t.kind == kindSPM {
			if b, ok := parseByteToken(text); ok {
				return string([]byte{b})
			}
		}
		return decodeByteLevel(text)
	}
	return ""
}

func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// lookupByte finds the token for a raw byte (byte fallback).
func (t *Tokenizer) lookupByte(b byte) int32 {
	if t.kind == kindSPM {
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			return id
		}
		if id, ok := t.ids[string([]byte{b})]; ok {
			return id
		}
		return t.unk
	}
	if id, ok := t.ids[byteToUnicode[b]]; ok {
		return id
	}
	return t.unk
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id (-1 if none).
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id (-1 if none).
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn id (-1 if none).
func (t *Tokenizer) EOT() int32 { return t.eot }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS && t.bos != none }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, or a token such
// as <|im_end|>, <|eot_id|>, <|endoftext|>.
func (t *Tokenizer) IsEOG(id int32) bool { return id >= 0 && int(id) < len(t.eog) && t.eog[id] }

// IsControl reports whether id is a control token (renders as "").
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.types) && t.types[id] == typeControl
}

// Piece is the text of one token as bytes (may be partial UTF-8); control
// tokens give "".
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Text is the token's vocabulary string as stored (e.g. "<|im_end|>", "▁the").
func (t *Tokenizer) Text(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID looks a token up by its vocabulary string.
func (t *Tokenizer) ID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// Decode concatenates the tokens' pieces (llama_token_to_piece with
// special=false, no leading-space strip).
func (t *Tokenizer) Decode(ids []int32) string {
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(t.Piece(id))
	}
	return sb.String()
}

// fragment is a run of raw text or an already-resolved special token.
type fragment struct {
	text  string
	token int32 // none for raw text
}

// Encode tokenizes text. addSpecial adds BOS/EOS as the model asks;
// parseSpecial lets control tokens such as "<|im_start|>" be recognised in
// the text (user-defined tokens are always recognised, as in llama.cpp).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	frags := t.partition(text, parseSpecial)
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.AddBOS() {
		out = append(out, t.bos)
	}
	switch t.kind {
	case kindSPM:
		prevSpecial := true // the first raw fragment gets the space prefix
		for _, fr := range frags {
			if fr.token != none {
				out = append(out, fr.token)
				prevSpecial = true
				continue
			}
			s := fr.text
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", "▁"), out)
			prevSpecial = false
		}
	case kindBPE:
		for _, fr := range frags {
			if fr.token != none {
				out = append(out, fr.token)
				continue
			}
			for _, word := range t.pre.split(fr.text) {
				out = t.encodeBPEWord(word, out)
			}
		}
	case kindWPM:
		for _, fr := range frags {
			if fr.token != none {
				out = append(out, fr.token)
				continue
			}
			out = t.encodeWPM(fr.text, out)
		}
		if addSpecial && t.sep != none {
			out = append(out, t.sep)
		}
	}
	if addSpecial && t.addEOS && t.eos != none {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text around special tokens, longest first, as
// llama.cpp's tokenizer_st_partition does.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{text: text, token: none}}
	if text == "" {
		return nil
	}
	for _, id := range t.specials {
		typ := t.types[id]
		if !parseSpecial && (typ == typeControl || typ == typeUnknown) {
			continue
		}
		special := t.tokens[id]
		var next []fragment
		changed := false
		for _, fr := range frags {
			if fr.token != none || !strings.Contains(fr.text, special) {
				next = append(next, fr)
				continue
			}
			changed = true
			rest := fr.text
			for {
				i := strings.Index(rest, special)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: rest[:i], token: none})
				}
				next = append(next, fragment{token: id})
				rest = rest[i+len(special):]
			}
			if rest != "" {
				next = append(next, fragment{text: rest, token: none})
			}
		}
		if changed {
			frags = next
		}
	}
	return frags
}
