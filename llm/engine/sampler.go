package engine

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/voxpipe/voxpipe/cgo/kernels"
)

// samplerParams are the per-request sampling settings.
type samplerParams struct {
	temperature   float32 // <= 0: greedy
	topK          int     // 0: off
	topP          float32 // 0 or >= 1: off
	minP          float32 // 0: off
	repeatPenalty float32 // 0 or 1: off
	repeatLastN   int     // how many recent tokens the penalty looks at
	seed          uint64  // 0: random
}

// sampler picks the next token from logits. Its buffers are allocated once
// per engine so sampling allocates nothing per token.
type sampler struct {
	p      samplerParams
	rng    *rand.Rand
	pcg    *rand.PCG
	cands  []int32
	probs  []float32
	recent []int32 // ring of the last repeatLastN tokens
	head   int
	filled int
	logits []float32 // the logits being sorted (for the comparison function)
}

func newSampler(vocab int) *sampler {
	pcg := rand.NewPCG(1, 2)
	return &sampler{pcg: pcg, rng: rand.New(pcg), cands: make([]int32, vocab), probs: make([]float32, vocab), recent: make([]int32, 256)}
}

// reset prepares for a new request. history seeds the repetition window.
func (s *sampler) reset(p samplerParams, history []int32) {
	if p.repeatLastN <= 0 || p.repeatLastN > len(s.recent) {
		p.repeatLastN = min(64, len(s.recent))
	}
	s.p = p
	seed := p.seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	s.head, s.filled = 0, 0
	if len(history) > p.repeatLastN {
		history = history[len(history)-p.repeatLastN:]
	}
	for _, id := range history {
		s.accept(id)
	}
}

// accept records a token for the repetition penalty.
func (s *sampler) accept(id int32) {
	n := s.p.repeatLastN
	if n <= 0 {
		return
	}
	s.recent[s.head] = id
	s.head = (s.head + 1) % n
	if s.filled < n {
		s.filled++
	}
}

// argmax returns the index of the largest logit, the lowest on ties.
func argmax(logits []float32) int32 { return int32(kernels.Argmax(logits)) }

// sample picks a token; logits are modified in place.
func (s *sampler) sample(logits []float32) int32 {
	cands, probs, sum := s.prepare(logits)
	if cands == nil {
		return argmax(logits)
	}
	r := s.rng.Float32() * sum
	for i := range probs {
		r -= probs[i]
		if r < 0 {
			return cands[i]
		}
	}
	return cands[len(cands)-1]
}

// prepare applies the repetition penalty to logits in place and, when
// sampling, returns the kept candidates (best first) with their
// unnormalised probabilities and the probabilities' sum. It returns nil
// candidates for greedy decoding. sample and dist (speculative decoding)
// share it so both see exactly the same processed distribution.
func (s *sampler) prepare(logits []float32) (cands []int32, probs []float32, sum float32) {
	p := &s.p
	if p.repeatPenalty > 0 && p.repeatPenalty != 1 {
		for i := 0; i < s.filled; i++ {
			id := s.recent[i]
			if int(id) >= len(logits) || id < 0 {
				continue
			}
			// Penalise each distinct token once.
			seen := false
			for k := 0; k < i; k++ {
				if s.recent[k] == id {
					seen = true
					break
				}
			}
			if seen {
				continue
			}
			if logits[id] > 0 {
				logits[id] /= p.repeatPenalty
			} else {
				logits[id] *= p.repeatPenalty
			}
		}
	}
	if p.temperature <= 0 {
		return nil, nil, 0
	}
	// Candidates: drop tokens whose probability is below e^-30 of the best
	// (they could never be drawn in float32 anyway), then sort.
	maxL := logits[argmax(logits)]
	cut := maxL - 30*p.temperature
	cands = s.cands[:0]
	for i, v := range logits {
		if v >= cut {
			cands = append(cands, int32(i))
		}
	}
	s.logits = logits
	if p.topK > 0 && p.topK < len(cands) {
		cands = s.selectTop(cands, p.topK)
	}
	slices.SortFunc(cands, s.cmp)
	probs = s.probs[:len(cands)]
	invT := 1 / p.temperature
	for i, id := range cands {
		e := float32(math.Exp(float64((logits[id] - maxL) * invT)))
		probs[i] = e
	}
	keep := len(cands)
	if p.minP > 0 {
		floor := probs[0] * p.minP
		for keep > 1 && probs[keep-1] < floor {
			keep--
		}
	}
	if p.topP > 0 && p.topP < 1 {
		var total float32
		for i := 0; i < keep; i++ {
			total += probs[i]
		}
		var cum float32
		for i := 0; i < keep; i++ {
			cum += probs[i]
			if cum >= p.topP*total {
				keep = i + 1
				break
			}
		}
	}
	for i := 0; i < keep; i++ {
		sum += probs[i]
	}
	return cands[:keep], probs[:keep], sum
}

// cmp orders candidate ids by descending logit, then ascending id.
func (s *sampler) cmp(a, b int32) int {
	la, lb := s.logits[a], s.logits[b]
	switch {
	case la > lb:
		return -1
	case la < lb:
		return 1
	}
	return int(a - b)
}

// selectTop moves the k best candidates (by cmp) to the front and returns
// them, unordered: a min-heap of size k over the rest, O(n log k), so a
// large vocabulary with flat logits is not sorted whole.
func (s *sampler) selectTop(c []int32, k int) []int32 {
	h := c[:k]
	// worse(a, b): a ranks after b.
	worse := func(a, b int32) bool { return s.cmp(a, b) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && worse(h[r], h[l]) {
				m = r
			}
			if !worse(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, id := range c[k:] {
		if worse(h[0], id) { // id beats the worst kept
			h[0] = id
			down(0)
		}
	}
	return h
}
