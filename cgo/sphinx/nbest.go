package sphinx

// NBestHyp is one entry of an utterance's n-best list.
type NBestHyp struct {
	Text string
	// Score is the path's score in the lattice (acoustic plus weighted
	// language model, natural log): higher is better; only differences
	// between entries of one list mean anything.
	Score float64
}
