package tokenizer

import ()

// symbol is a span of the input in a doubly linked list; n == 0 once
// merged into its left neighbour.
type symbol struct {
	start, n   int
	prev, next int
}

// lessSPM pops the highest score first, ties to the leftmost pair
// (llama.cpp's llm_bigram_spm::comparator).
var lessSPM = func(a, b spmBigram) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
}

// splitChars makes one symbol per UTF-8 character (a bad byte is a character).
func splitChars(text string) []symbol {
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		n := utf8LenFromLead(text[off])
		n = min(n, len(text)-off)
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// utf8LenFromLead is llama.cpp's unicode_len_utf8: the length claimed by the
// lead byte, without validating continuation bytes.
func utf8LenFromLead(b byte) int {
	switch {
	case b < 0x80:
		return 1
	case b>>5 == 0x6:
		return 2
	case b>>4 == 0xE:
		return 3
	case b>>3 == 0x1E:
		return 4
	}
	return 1
}

// encodeSPM runs llama.cpp's SentencePiece BPE on text (spaces already ▁).
func (t *Tokenizer) encodeSPM(text string, out []int32) []int32 {
	syms := splitChars(text)
	if len(syms) == 0 {
		return out
	}
	q := minHeap[spmBigram]{items: make([]spmBigram, 0, len(syms)), less: lessSPM}
	revMerge := map[string][2]int{}
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		s := text[syms[left].start : syms[right].start+syms[right].n]
		id, ok := t.ids[s]
		if !ok {
			return
		}
		q.push(spmBigram{left: left, right: right, score: t.scores[id], size: len(s)})
		revMerge[s] = [2]int{left, right}
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side was merged since
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	var resegment func(i int)
	resegment = func(i int) {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[s]; ok {
			resegment(p[0])
			resegment(p[1])
			return
		}
		for j := 0; j < len(s); j++ {
			if id := t.byteTokens[s[j]]; id != none {
				out = append(out, id)
			}
		}
	}
	for i := 0; i >= 0; i = syms[i].next {
		resegment(i)
	}
	return out
}
