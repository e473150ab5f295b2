package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteToUnicode is GPT-2's reversible byte → printable character table:
// printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
var (
	byteToUnicode [256]string
	unicodeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if !printable {
			r = next
			next++
		}
		byteToUnicode[b] = string(r)
		unicodeToByte[r] = byte(b)
	}
}

// decodeByteLevel maps a byte-level BPE token back to raw bytes; characters
// outside the table pass through as UTF-8.
func decodeByteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if b, ok := unicodeToByte[r]; ok {
			sb.WriteByte(b)
		} else {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func encodeByteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteString(byteToUnicode[s[i]])
	}
	return sb.String()
}

type bpeSymbol struct {
	start, n   int
	prev, next int
	id         int32 // token of text[start:start+n], none if not in the vocabulary
}

// lessBPE pops the lowest merge rank first, ties to the leftmost pair.
var lessBPE = func(a, b bpeBigram) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.left < b.left
}

type bpeBigram struct {
	left, right int
	rank        int32
	size        int
}

// encodeBPEWord merges one pre-tokenized word as llama.cpp's
// llm_tokenizer_bpe_session does.
func (t *Tokenizer) encodeBPEWord(raw string, out []int32) []int32 {
	word := encodeByteLevel(raw)
	if t.ignoreMerges {
		if id, ok := t.ids[word]; ok {
			return append(out, id)
		}
	}
	syms := make([]bpeSymbol, 0, len(word))
	for off := 0; off < len(word); {
		_, n := utf8.DecodeRuneInString(word[off:])
		id, ok := t.ids[word[off:off+n]]
		if !ok {
			id = none
		}
		syms = append(syms, bpeSymbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1, id: id})
		off += n
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	q := minHeap[bpeBigram]{items: make([]bpeBigram, 0, len(syms)), less: lessBPE}
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 || syms[left].id == none || syms[right].id == none {
			return
		}
		rank, ok := t.ranks[pairKey(syms[left].id, syms[right].id)]
		if !ok {
			return
		}
		q.push(bpeBigram{left: left, right: right, rank: rank, size: syms[left].n + syms[right].n})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		id, ok := t.ids[word[l.start:l.start+l.n]]
		if !ok {
			id = none
		}
		l.id = id
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i]
		if s.id != none {
			out = append(out, s.id)
			continue
		}
		// Not a token: fall back to one token per byte, skipping bytes the
		// vocabulary lacks (llama.cpp does the same).
		for _, b := range []byte(decodeByteLevel(word[s.start : s.start+s.n])) {
			if id, ok := t.ids[byteToUnicode[b]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
