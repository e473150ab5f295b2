package engine

// Speculative decoding. A cheap drafter (a small model with the same
// vocabulary, or prompt lookup) proposes k tokens after the token just
// chosen; the target runs the chosen token and the k proposals in one
// batched forward pass (each weight is read once for k+1 tokens) and keeps
// the longest prefix it agrees with, plus one token of its own.
//
//   - Greedy: a proposal is accepted when it is what the target's sampler
//     would pick there (repetition penalty included), so the output is the
//     plain greedy output token for token.
//   - Sampling: the standard rule (Leviathan et al., Chen et al.): accept
//     proposal d with probability min(1, p(d)/q(d)), on rejection draw from
//     norm(max(0, p−q)); when all k are accepted draw one more from p. p
//     and q are the sampler's processed distributions (temperature, top-k,
//     top-p, min-p, repetition penalty with the same token window), so the
//     output follows the target's distribution exactly. Prompt lookup is a
//     point-mass q.
//   - Rollback is free: a kvCache is indexed by position and attention only
//     reads positions below the query's, so dropping rejected tokens from a
//     sequence's token list is enough; the next forward overwrites them.
//   - k is chosen each round to maximise expected tokens per second from
//     measurements (chooseK): the target's pass time for each k, the draft
//     step time, the round's other costs and the chance of keeping the
//     proposal at each depth. Every 16 rounds a longer draft is probed.
//     Prompt lookup keeps those chances apart by the length of the n-gram
//     it matched (a trigram inside a quoted passage is kept far more often
//     than a single repeated word), and ends a proposal before its first
//     control token and after its first newline (specRound). An answer to
//     a "what is X" question first gets the rest of its likely opening
//     ("A volcano is a", opening.go), measured in a bucket of its own, and
//     a token the target keeps replacing with the same other one ("\n"
//     at the end of a quoted passage with ".") is proposed as that one
//     (substitute).
//     On the demo model a verification row costs ~0.12-0.27 of a one-token
//     step (the packed Q8_0 kernel) and a draft step ~0.1-0.15, which caps the speed-up near 1.3-1.5x
//     at the distilled draft's acceptance; memory-bound targets gain more.
//     Greedy output never depends on k; with sampling the output
//     distribution does not either, but the exact tokens of a seeded run
//     can differ between runs because the measured costs can.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// specMaxK bounds the proposals per round.
const specMaxK = 8

// specBuckets are the contexts acceptance is measured in: 0 for a draft
// model, n for a prompt-lookup match of an n-gram (1-3), bucketOpening for
// an answer's opening. (Also keeping
// apart matches whose proposal stops within 3 tokens, the question's
// "volcano?" against the passage's "volcano: a fissure ...", gained in a
// replay of grounded answers but not in measurement: 1.58-1.99x against
// 1.91-2.17x.)
const specBuckets = 5

// bucketOpening is the bucket of proposals that begin with an answer's
// likely opening (opening.go).
const bucketOpening = 4

// draftOneThreadBytes is the weight size below which a draft model decodes
// on one thread.
const draftOneThreadBytes = 16 << 20

// SpecStats counts what speculative decoding did since the engine opened.
type SpecStats struct {
	Rounds   int // verification passes that carried at least one proposal
	Drafted  int // tokens proposed
	Accepted int // proposals the target kept
}

// AcceptanceRate is the share of proposed tokens that were kept.
func (s SpecStats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// MeanAccepted is the mean number of proposals kept per round.
func (s SpecStats) MeanAccepted() float64 {
	if s.Rounds == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Rounds)
}

// draftModel is a second, smaller model with its own compute scratch and
// one KV cache that follows whatever the target is decoding.
type draftModel struct {
	file    *gguf.File
	release func() error
	model   *model
	rt      *compute
	seq     sequence // tokens the draft's kv holds
}

func (d *draftModel) close() error {
	d.rt.close()
	err := d.release()
	if cerr := d.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// speculator holds the per-engine speculative-decoding state; only the
// scheduler goroutine uses it.
type speculator struct {
	draft  *draftModel // nil: prompt lookup
	fixedK int         // > 0: always propose this many (tests)
	stats  SpecStats

	// Measured while decoding (EMAs): the wall time of a target pass over
	// k+1 rows, of one draft step, and the chance that proposal j is kept
	// given that the ones before it were, in each bucket (the current
	// round's is bucket). calibrate seeds the times.
	passT      [specMaxK + 1]float64 // [0]: seconds of a one-token step; [k]: a (k+1)-row pass relative to it
	passN      [specMaxK + 1]float64 // measurements behind passT[k] (capped): the weights of passLine's fit
	draftT     float64               // a draft step relative to passT[0]
	extraT     float64               // the rest of a speculative round: sampling and checking the rows, streaming
	accAt      [specBuckets][specMaxK]float64
	accSeen    [specBuckets][specMaxK]bool // accAt holds a measurement, not the prior
	bucket     int
	catchUp    time.Duration // total spent bringing a lagging draft model up to date
	sinceProbe int           // rounds since the last probe
	probeGap   int           // rounds between probes: minProbeGap, doubled after each losing probe
	probing    bool          // the current round is a probe

	batch  []int32   // [1+specMaxK] chosen token + proposals
	all    []float32 // [(1+specMaxK)][vocab] target logits of the batch
	q      []float32 // [specMaxK][vocab] draft distributions (sampling)
	p      []float32 // [vocab] target distribution (sampling)
	recent []int32   // saved sampler window while drafting
	// stopAt marks the tokens a lookup proposal ends at (stopBefore,
	// stopAfter); nil: none.
	stopAt []uint8
	// Corrections learnt from rejected lookup proposals (substitute):
	// where a proposal had token d and the target chose subTo[d] instead,
	// subN[d] times running. Nil for a draft model.
	subTo   []int32
	subN    []uint8
	subAt   int   // depth of the substituted proposal in this round; -1: none
	subFrom int32 // the token it replaced
}

func newSpeculator(vocab int, draft *draftModel, draftCost float64) *speculator {
	sp := &speculator{
		draft: draft,
		batch: make([]int32, 1+specMaxK),
		all:   make([]float32, (1+specMaxK)*vocab),
		q:     make([]float32, specMaxK*vocab),
		p:     make([]float32, vocab),
	}
	for b := range sp.accAt {
		for j := range sp.accAt[b] {
			sp.accAt[b][j] = 0.6 // a prior that gets a draft tried
		}
	}
	sp.seedTimes(1e-3, 0.2, 0.1, draftCost)
	if draft == nil {
		sp.subTo = make([]int32, vocab)
		sp.subN = make([]uint8, vocab)
	}
	sp.subAt = -1
	return sp
}

// seedTimes sets the costs chooseK starts from: a one-token step of one
// seconds, a 2-row pass costing base more (relative), each further row
// perRow more, a draft step draft.
func (sp *speculator) seedTimes(one, base, perRow, draft float64) {
	sp.passT[0] = one
	for k := 1; k <= specMaxK; k++ {
		sp.passT[k] = 1 + base + float64(k-1)*perRow
	}
	sp.draftT = draft
}

// timeWeight and accWeight are the EMA weights of a new measurement: times
// follow the machine's load within a few rounds, acceptance the content.
const (
	timeWeight = 0.2
	accWeight  = 0.1
)

func ema(v *float64, x, w float64) { *v += w * (x - *v) }

// emaTime is ema for a time, whose noise is one-sided: a thread the OS
// deschedules makes a pass slow, nothing makes one fast. A slower
// measurement moves the average an eighth as far as a faster one, so the
// costs follow the machine's quiet speed and a few stalled passes on a
// busy machine do not price long proposals out for the rest of the run
// (they did: one 2-row pass measured at 2.3 one-token steps kept a run on
// one proposal a round through passages kept 95% of the time).
func emaTime(v *float64, x float64) {
	w := timeWeight
	if x > *v {
		w /= 8
	}
	*v += w * (x - *v)
}

// chooseK picks the proposal count with the best expected tokens per
// second: a round with k proposals yields 1 + Σ_{i≤k} Π_{j<i} accAt[j]
// tokens and costs passT[0]·(passT[k] + k·draftT) + extraT. Both sides are
// measured while decoding, so the choice follows the machine (a busy core makes long
// verification passes dearer) and the content (a quoting answer raises
// acceptance). Speculating must promise 5% more than a plain step, for
// what the model leaves out (sampling the extra rows). Now and then it
// proposes one more than the best (a probe), so the time and acceptance of
// a longer draft are measured too: seeds from a cold calibration may
// overprice them, and then they would never be tried. A probe that yields
// fewer tokens per second than plain steps doubles the gap to the next
// (a lagging draft model must catch up first, which a big draft makes dear).
func (sp *speculator) chooseK() int {
	if sp.fixedK > 0 {
		return sp.fixedK
	}
	k := sp.bestK()
	sp.sinceProbe++
	if sp.sinceProbe >= max(sp.probeGap, minProbeGap) && k < specMaxK {
		sp.sinceProbe, sp.probing = 0, true
		k++
	}
	return k
}

// probed reports the yield of a probe round.
func (sp *speculator) probed(tokens int, d time.Duration) {
	sp.probing = false
	if float64(tokens)/d.Seconds() < 1/sp.passT[0] {
		sp.probeGap = min(max(sp.probeGap, minProbeGap)*2, maxProbeGap)
	} else {
		sp.probeGap = minProbeGap
	}
}

// minProbeGap and maxProbeGap bound the rounds between probes.
const (
	minProbeGap = 16
	maxProbeGap = 1024
)

// catchUpTokens is the lag a draft model has in a round that follows a
// speculative one (the pending token and the last kept); more means it sat
// out plain steps and must catch up.
const catchUpTokens = 2

// firstProbeGap is the gap before the first probe: a draft whose step costs
// a good part of a target step (a Q4_0 self-draft of a compute-bound
// target) has dear catch-ups, so it is probed rarely from the start.
func firstProbeGap(draftCost float64) int {
	if draftCost > 0.3 {
		return 16 * minProbeGap
	}
	return minProbeGap
}

// bestK is the proposal count with the best expected tokens per second
// in the current bucket.
func (sp *speculator) bestK() int {
	best, bestK := 1.05/sp.passT[0], 0
	tokens, keep := 1.0, 1.0
	a, b := sp.passLine()
	acc, seen := &sp.accAt[sp.bucket], &sp.accSeen[sp.bucket]
	p := 0.0
	for k := 1; k <= specMaxK; k++ {
		// A depth never reached yet (proposals were shorter: the match
		// ran out, or k stayed low) is expected to be kept as often as the
		// one before it: with the prior, a quoting match whose first
		// depths are kept 90% of the time would never be drafted long.
		if seen[k-1] || k == 1 {
			p = acc[k-1]
		}
		keep *= p
		tokens += keep
		pass := 1 + a + b*float64(k-1)
		if rate := tokens / (sp.passT[0]*(pass+float64(k)*sp.draftT) + sp.extraT); rate > best {
			best, bestK = rate, k
		}
	}
	return bestK
}

// passFitCap bounds the weight of one pass size in passLine's fit, so the
// sizes chosen most do not drown the others' measurements.
const passFitCap = 32

// passLine fits a straight line to every pass size's measured relative
// cost (weighted by how often each was measured; the seeds count once):
// a (k+1)-row pass costs 1 + a + b·(k−1), a and b at least 0. Single pass times swing with the machine's load, so one
// size's own average can look dearer than a larger one's and flip the
// choice; the line keeps the costs rising with k and lets every
// measurement inform every size.
func (sp *speculator) passLine() (a, b float64) {
	var sw, sx, sy, sxx, sxy float64
	for j := 1; j <= specMaxK; j++ {
		w, x, y := sp.passN[j]+1, float64(j-1), sp.passT[j]-1
		sw, sx, sy, sxx, sxy = sw+w, sx+w*x, sy+w*y, sxx+w*x*x, sxy+w*x*y
	}
	if den := sw*sxx - sx*sx; den > 0 {
		b = max((sw*sxy-sx*sy)/den, 0)
	}
	return max((sy-b*sx)/sw, 0), b
}

// observe records whether the proposal at depth j was kept, in the
// current bucket.
func (sp *speculator) observe(j int, accepted bool) {
	x := 0.0
	if accepted {
		x = 1
	}
	acc, seen := &sp.accAt[sp.bucket], &sp.accSeen[sp.bucket]
	if !seen[j] {
		seen[j] = true
		if j > 0 { // start from what bestK assumed (depth j-1 was just observed)
			acc[j] = acc[j-1]
		}
	}
	ema(&acc[j], x, accWeight)
}

// Where a prompt-lookup proposal ends (lookupStops).
const (
	// stopBefore: a control token. An answer ends there, so nothing after
	// one can be kept, and proposing the end itself gains nothing: when
	// the proposals before it are kept, the target's own next token is
	// that end anyway.
	stopBefore = 1 + iota
	// stopAfter: a token with a newline. A quoted passage or line ends
	// there and the prompt goes on with something else ("...gases
	// erupt\n\nQuestion:").
	stopAfter
)

// lookupStops marks the tokens a prompt-lookup proposal ends at.
func lookupStops(vocab int, control func(int32) bool, piece func(int32) string) []uint8 {
	stop := make([]uint8, vocab)
	for id := range stop {
		switch {
		case control(int32(id)):
			stop[id] = stopBefore
		case strings.Contains(piece(int32(id)), "\n"):
			stop[id] = stopAfter
		}
	}
	return stop
}

// cutDraft is how many of props to propose: up to the first stop token,
// and that token too when it is a newline.
func (sp *speculator) cutDraft(props []int32) int {
	if sp.stopAt == nil {
		return len(props)
	}
	for i, id := range props {
		if id < 0 || int(id) >= len(sp.stopAt) {
			continue
		}
		switch sp.stopAt[id] {
		case stopBefore:
			return i
		case stopAfter:
			return i + 1
		}
	}
	return len(props)
}

// subMin is how many times running the target must have replaced a
// proposed token with the same other token before lookup proposes that
// one instead.
const subMin = 2

// substitute applies a learnt correction to a lookup proposal: the first
// token the target has lately replaced with another, subMin times running,
// becomes that other token, and the proposal ends after it (the source went
// on from the replaced token, the answer from its own). Grounded answers
// end a quoted passage with "." where the passage has a newline, and say
// "volcano is" where the question has "volcano?": after two answers the
// round that reaches the passage's end also proposes the full stop, and
// the answer ends in that round instead of one more. It returns the
// proposal's new length and records the substituted depth in sp.subAt.
func (sp *speculator) substitute(props []int32) int {
	sp.subAt = -1
	if sp.subN == nil {
		return len(props)
	}
	for i, id := range props {
		if id >= 0 && int(id) < len(sp.subN) && sp.subN[id] >= subMin {
			sp.subFrom, props[i] = id, sp.subTo[id]
			sp.subAt = i
			return i + 1
		}
	}
	return len(props)
}

// learn records what the target did with lookup proposal d at depth j:
// kept it, or chose next instead. A kept token's correction no longer
// holds; a replaced one's is counted (or started). A substituted proposal
// counts for the token it replaced: kept, the correction stands; rejected,
// the target's choice there starts a new count.
func (sp *speculator) learn(j int, d, next int32, accepted bool) {
	if sp.subN == nil {
		return
	}
	if j == sp.subAt {
		if accepted {
			return
		}
		d = sp.subFrom
	}
	if d < 0 || int(d) >= len(sp.subN) {
		return
	}
	switch {
	case accepted:
		sp.subN[d] = 0
	case next < 0 || int(next) >= len(sp.subN) || (sp.stopAt != nil && sp.stopAt[next] == stopBefore):
		// The answer ends instead (a control token): that says nothing
		// of what replaces d where it goes on.
	case sp.subTo[d] == next && sp.subN[d] > 0:
		sp.subN[d] = min(sp.subN[d]+1, 255)
	default:
		sp.subTo[d], sp.subN[d] = next, 1
	}
}

// calibrate measures the relative costs chooseK uses: the best of a few
// timed passes each of the target at 1 and 1+specMaxK tokens and of the
// draft at 1 token, on a scratch cache. It runs before the scheduler starts.
func (e *Engine) calibrate() error {
	sp := e.spec
	const reps = 5
	best := func(rt *compute, n int, all []float32) (time.Duration, error) {
		kv := newKVCache(rt.hp, 2*(1+specMaxK))
		tokens := sp.batch[:n]
		var min time.Duration
		for i := 0; i <= reps; i++ { // the first pass warms caches
			start := time.Now()
			if err := rt.forward(context.Background(), kv, tokens, 0, all); err != nil {
				return 0, err
			}
			if d := time.Since(start); i > 0 && (min == 0 || d < min) {
				min = d
			}
		}
		return max(min, time.Microsecond), nil
	}
	clear(sp.batch)
	one, err := best(e.rt, 1, nil)
	if err != nil {
		return err
	}
	two, err := best(e.rt, 2, sp.all)
	if err != nil {
		return err
	}
	full, err := best(e.rt, 1+specMaxK, sp.all)
	if err != nil {
		return err
	}
	base := min(max(two.Seconds()/one.Seconds()-1, 0.02), 4)
	perRow := min(max((full.Seconds()-two.Seconds())/one.Seconds()/(specMaxK-1), 0.02), 2)
	draft := sp.draftT
	if sp.draft != nil {
		d, err := best(sp.draft.rt, 1, nil)
		if err != nil {
			return err
		}
		draft = min(max(d.Seconds()/one.Seconds(), 0.01), 2)
	}
	sp.seedTimes(one.Seconds(), base, perRow, draft)
	sp.probeGap = firstProbeGap(draft)
	return nil
}

// openDraft loads the draft model and checks that its vocabulary is the
// target's, token for token.
func openDraft(cfg Config, target *gguf.File, targetModel *model) (*draftModel, float64, error) {
	if _, err := os.Stat(cfg.DraftPath); errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: draft %s (the demo draft is models/voxpipe-demo-draft-q8_0.gguf; \"voxpipe llm quantize TARGET OUT --type q4_0\" makes a self-draft)", ErrModelNotFound, cfg.DraftPath)
	}
	f, err := gguf.Open(cfg.DraftPath)
	if err != nil {
		return nil, 0, fmt.Errorf("engine: draft model %s: %w", cfg.DraftPath, err)
	}
	fail := func(err error) (*draftModel, float64, error) {
		f.Close()
		return nil, 0, err
	}
	tt, _ := target.Strings("tokenizer.ggml.tokens")
	dt, _ := f.Strings("tokenizer.ggml.tokens")
	if len(tt) != len(dt) {
		return fail(fmt.Errorf("%w: draft %s has %d tokens, target %d", ErrDraftVocab, cfg.DraftPath, len(dt), len(tt)))
	}
	for i := range tt {
		if tt[i] != dt[i] {
			return fail(fmt.Errorf("%w: draft %s token %d is %q, target has %q", ErrDraftVocab, cfg.DraftPath, i, dt[i], tt[i]))
		}
	}
	m, err := loadModel(f)
	if err != nil {
		return fail(fmt.Errorf("engine: draft model %s: %w", cfg.DraftPath, err))
	}
	m.hp.kvHalf = m.quantized() && !cfg.KVF32
	if m.hp.vocab != targetModel.hp.vocab {
		return fail(fmt.Errorf("%w: draft %s has %d embedding rows, target %d", ErrDraftVocab, cfg.DraftPath, m.hp.vocab, targetModel.hp.vocab))
	}
	release := func() error { return nil }
	if !cfg.InPlace {
		if release, err = m.copyWeights(!cfg.NoRepack); err != nil {
			return fail(fmt.Errorf("engine: draft weights memory: %w", err))
		}
	}
	// A small draft runs on the scheduler's thread alone: its steps are
	// too short for splitting them to pay (the 3.2M-parameter demo draft:
	// 0.12 ms a token on one thread, 0.29 ms on two).
	threads := cfg.Threads
	if m.weightBytes() < draftOneThreadBytes {
		threads = 1
	}
	d := &draftModel{file: f, release: release, model: m, rt: newCompute(m, threads, cfg.ContextSize, defaultBatch)}
	d.seq.tokens = make([]int32, 0, cfg.ContextSize)
	d.seq.kv = newKVCache(&m.hp, cfg.ContextSize)
	// A decode step streams every weight once, so bytes are the cost.
	cost := float64(m.weightBytes()) / float64(max(targetModel.weightBytes(), 1))
	return d, cost, nil
}

// weightBytes is the size of the matrices a decode step reads.
func (m *model) weightBytes() int64 {
	var n int64
	add := func(w *weight) {
		if w != nil {
			n += int64(w.rows) * int64(w.rowBytes())
		}
	}
	add(m.output)
	for i := range m.layers {
		l := &m.layers[i]
		for _, w := range []*weight{l.wq, l.wk, l.wv, l.wo, l.wGate, l.wUp, l.wDown} {
			add(w)
		}
	}
	return n
}

// saveWindow and restoreWindow bracket drafting, which extends the
// sampler's repetition window with tokens that may be rejected.
func (sp *speculator) saveWindow(s *sampler) (head, filled int) {
	sp.recent = append(sp.recent[:0], s.recent...)
	return s.head, s.filled
}

func (sp *speculator) restoreWindow(s *sampler, head, filled int) {
	copy(s.recent, sp.recent)
	s.head, s.filled = head, filled
}

// dist writes the sampler's processed distribution of logits (normalised,
// zero outside the kept candidates) into dst. Sampling mode only.
func (s *sampler) dist(logits, dst []float32) {
	cands, probs, sum := s.prepare(logits)
	clear(dst)
	inv := 1 / sum
	for i, id := range cands {
		dst[id] = probs[i] * inv
	}
}

// draw samples an index from a normalised (or, with total, unnormalised)
// distribution.
func (s *sampler) draw(dist []float32, total float32) int32 {
	r := s.rng.Float32() * total
	last := int32(-1)
	for i, v := range dist {
		if v > 0 {
			r -= v
			last = int32(i)
			if r < 0 {
				return int32(i)
			}
		}
	}
	return last
}

// lookupDraft proposes up to len(dst) tokens by finding an earlier
// occurrence of the history's last n-gram (n = 3, 2, 1) and copying what
// followed it. It returns how many proposals it wrote into dst.
//
// A trigram match is taken as found, the most recent one. Of the shorter
// ones, it takes the most recent occurrence whose continuation does not
// reach a control token (ends, e.g. <|im_end|>) within len(dst) tokens,
// trying a bigram, then a single token; only when none is clean, the most
// recent bigram (or token) match. A grounded answer ("A volcano is a
// fissure ...") repeats the question's words before it quotes the passage
// ("volcano: a fissure ..."): the question's copy of "is a" runs into the
// end of its message within a token or two, the passage's runs on. ends ==
// nil treats no token as a control token.
func lookupDraft(history []int32, dst []int32, ends func(int32) bool) int {
	k, _ := lookupDraftN(history, dst, ends)
	return k
}

// lookupDraftN is lookupDraft that also says the length of the n-gram it
// matched (0 when none).
func lookupDraftN(history []int32, dst []int32, ends func(int32) bool) (k, n int) {
	h := len(history)
	fallback, fallbackN := -1, 0
	for n := 3; n >= 1; n-- {
		if h <= n {
			continue
		}
		tail := history[h-n:]
		for start := h - n - 1; start >= 0; start-- {
			match := true
			for i := 0; i < n; i++ {
				if history[start+i] != tail[i] {
					match = false
					break
				}
			}
			if !match {
				continue
			}
			follow := history[start+n:]
			if n == 3 || ends == nil || !reachesEnd(follow[:min(len(follow), len(dst))], ends) {
				return copy(dst, follow), n
			}
			if fallback < 0 {
				fallback, fallbackN = start, n
			}
		}
	}
	if fallback >= 0 {
		return copy(dst, history[fallback+fallbackN:]), fallbackN
	}
	return 0, 0
}

func reachesEnd(ids []int32, ends func(int32) bool) bool {
	for _, id := range ids {
		if ends(id) {
			return true
		}
	}
	return false
}

// proposeDraft runs the draft model over the target's tokens plus the
// chosen token (only what its cache lacks) and proposes k tokens. In
// sampling mode it fills sp.q with the distributions it drew from.
func (e *Engine) proposeDraft(ctx context.Context, samp *sampler, history []int32, k int, sampling bool) (int, error) {
	sp, d := e.spec, e.spec.draft
	cached := commonPrefix(d.seq.tokens, history)
	if cached == len(history) {
		cached-- // the last token must run again to produce logits
	}
	d.seq.tokens = d.seq.tokens[:cached]
	start := time.Now()
	if err := d.rt.forward(ctx, d.seq.kv, history[cached:], cached, nil); err != nil {
		return 0, err
	}
	if lag := len(history) - cached; lag > catchUpTokens {
		// A catch-up after plain steps (or a new prompt) is not the cost
		// of a proposal: it stays out of draftT and is charged to probing.
		sp.catchUp += time.Since(start)
	}
	d.seq.tokens = append(d.seq.tokens, history[cached:]...)
	vocab := e.model.hp.vocab
	head, filled := sp.saveWindow(samp)
	defer sp.restoreWindow(samp, head, filled)
	props := sp.batch[1:]
	for j := 0; j < k; j++ {
		var id int32
		if sampling {
			q := sp.q[j*vocab : (j+1)*vocab]
			samp.dist(d.rt.logits, q)
			id = samp.draw(q, 1)
		} else {
			id = samp.sample(d.rt.logits)
		}
		props[j] = id
		samp.accept(id)
		if j == k-1 {
			break
		}
		pos := len(d.seq.tokens)
		if pos >= e.cfg.ContextSize {
			return j + 1, nil
		}
		e.one[0] = id
		if err := d.rt.forward(ctx, d.seq.kv, e.one[:], pos, nil); err != nil {
			return 0, err
		}
		d.seq.tokens = append(d.seq.tokens, id)
	}
	return k, nil
}

// specRound runs one round for a decoding generation: the pending token
// plus up to k drafted proposals through the target in one pass, the
// longest agreeing prefix committed, then one token of the target's own.
// With k = 0 (the drafter cannot win at the current acceptance rate, or g
// is plain) it is an ordinary one-token step. Ending conditions and errors
// land in g.ended / g.err.
func (e *Engine) specRound(ctx context.Context, g *generation) {
	seq, sp := g.seq, e.spec
	if g.plain {
		sp = nil
	}
	pending := g.pending
	pos := len(seq.tokens)
	if pos >= e.cfg.ContextSize {
		g.ended = true
		return
	}
	vocab := e.model.hp.vocab
	sampling := g.samp.p.temperature > 0
	fail := func(err error) { g.ended, g.err = true, err }
	k := 0
	room := min(g.maxTokens-g.count, e.cfg.ContextSize-pos-1)
	switch {
	case sp != nil && sp.draft != nil:
		sp.bucket = 0
		k = min(sp.chooseK(), room)
	case sp != nil && room > 0:
		// Prompt lookup costs nothing to ask, so it is asked first: the
		// length of its match picks the acceptance measurements k is
		// chosen by, and the proposal ends at a stop token.
		seq.tokens = append(seq.tokens, pending)
		avail, n := 0, 0
		if g.opens != nil {
			if avail = e.openingDraft(g, seq.tokens, sp.batch[1:1+specMaxK]); avail > 0 {
				n = bucketOpening
			}
		}
		if avail == 0 {
			avail, n = lookupDraftN(seq.tokens, sp.batch[1:1+specMaxK], e.tok.IsControl)
		}
		seq.tokens = seq.tokens[:pos]
		avail = sp.cutDraft(sp.batch[1 : 1+avail])
		if avail = sp.substitute(sp.batch[1 : 1+avail]); avail > 0 {
			sp.bucket = n
			k = min(sp.chooseK(), avail, room)
			// When the chooser says "no proposals" a strong match (two
			// tokens or more, which mostly means the answer is quoting)
			// still gets one, so quoting is noticed within a token instead
			// of at the next probe.
			if k == 0 && n >= 2 && room > 1 {
				k = 1
			}
		}
	}
	var roundStart time.Time
	var parts float64 // seconds of the round spent in timed parts
	if k > 0 {
		roundStart = time.Now()
		count0 := g.count
		defer func() {
			if g.ended {
				sp.probing = false
				return
			}
			d := time.Since(roundStart)
			ema(&sp.extraT, max(d.Seconds()-parts, 0), timeWeight)
			if sp.probing {
				sp.probed(g.count-count0+1, d) // +1: the pending token the round fed
			}
		}()
		if sp.draft != nil { // (prompt lookup has its proposals in sp.batch already)
			seq.tokens = append(seq.tokens, pending) // history for the drafter
			start, catchUp0 := time.Now(), sp.catchUp
			var err error
			k, err = e.proposeDraft(ctx, g.samp, seq.tokens, k, sampling)
			seq.tokens = seq.tokens[:pos]
			if err != nil {
				fail(err)
				return
			}
			if k > 0 {
				d := time.Since(start)
				parts += d.Seconds()
				ema(&sp.draftT, (d-(sp.catchUp-catchUp0)).Seconds()/float64(k)/sp.passT[0], timeWeight)
			}
		}
	}
	if k == 0 {
		e.one[0] = pending
		start := time.Now()
		if err := e.rt.forward(ctx, seq.kv, e.one[:], pos, nil); err != nil {
			fail(err)
			return
		}
		if sp != nil {
			emaTime(&sp.passT[0], time.Since(start).Seconds())
		}
		seq.tokens = append(seq.tokens, pending)
		g.advance(g.samp.sample(e.rt.logits))
		return
	}
	sp.batch[0] = pending
	all := sp.all[:(k+1)*vocab]
	start := time.Now()
	if err := e.rt.forward(ctx, seq.kv, sp.batch[:k+1], pos, all); err != nil {
		fail(err)
		return
	}
	d := time.Since(start).Seconds()
	parts += d
	// Relative to the one-token step, so that a change of machine load
	// (which moves all pass times alike) does not leave stale entries
	// looking cheap or dear.
	// A pass over k+1 rows costs at least one one-token step and at most
	// k+1 of them; outside that a measurement is the machine's noise.
	emaTime(&sp.passT[k], min(max(d/sp.passT[0], 1), float64(k+1)))
	sp.passN[k] = min(sp.passN[k]+1, passFitCap)
	seq.tokens = append(seq.tokens, pending)
	sp.stats.Rounds++
	sp.stats.Drafted += k
	next := int32(-1)
	for j := 0; j < k; j++ {
		d := sp.batch[1+j]
		row := all[j*vocab : (j+1)*vocab]
		if !sampling {
			next = g.samp.sample(row)
		} else {
			g.samp.dist(row, sp.p)
			next = sp.verifySampled(g.samp, j, d)
		}
		accepted := next == d
		sp.observe(j, accepted)
		sp.learn(j, d, next, accepted)
		if !accepted {
			break
		}
		sp.stats.Accepted++
		seq.tokens = append(seq.tokens, d)
		next = -1
		if end, err := g.commit(d); end || err != nil {
			g.ended, g.err = true, err
			return
		}
	}
	if next < 0 { // every proposal kept: the target adds one more
		next = g.samp.sample(all[k*vocab : (k+1)*vocab])
	}
	g.advance(next)
}

// verifySampled applies the speculative-sampling rule to proposal d at
// position j, with the target's distribution in sp.p and the draft's in
// sp.q[j] (a point mass on d for prompt lookup): it returns d with
// probability min(1, p(d)/q(d)) and otherwise a draw from
// norm(max(0, p−q)). sp.p is overwritten.
func (sp *speculator) verifySampled(s *sampler, j int, d int32) int32 {
	p := sp.p
	qd := float32(1)
	if sp.draft != nil {
		qd = sp.q[j*len(p)+int(d)]
	}
	if s.rng.Float32()*qd < p[d] {
		return d
	}
	var total float32
	if sp.draft == nil {
		p[d] = 0
		for _, v := range p {
			total += v
		}
	} else {
		q := sp.q[j*len(p) : (j+1)*len(p)]
		for i, v := range p {
			v -= q[i]
			if v < 0 {
				v = 0
			}
			p[i] = v
			total += v
		}
	}
	if total <= 0 {
		// p ≤ q everywhere means p == q up to rounding, so d was as good
		// as certain to be accepted.
		return d
	}
	return s.draw(p, total)
}

// decodeIDs decodes a fresh sequence after prompt and returns the tokens,
// for Bench and tests. speculate=false decodes plainly even when a drafter
// is configured. It must run on the scheduler goroutine.
func (e *Engine) decodeIDs(ctx context.Context, prompt []int32, opens []string, p samplerParams, maxTokens int, speculate bool) (ids []int32, prefill, decode time.Duration, err error) {
	seq := &sequence{tokens: make([]int32, 0, e.cfg.ContextSize), kv: newKVCache(&e.model.hp, e.cfg.ContextSize)}
	start := time.Now()
	if _, err = e.prefill(ctx, seq, prompt); err != nil {
		return nil, 0, 0, err
	}
	prefill = time.Since(start)
	e.samp.reset(p, prompt)
	g := &generation{e: e, seq: seq, prompt: prompt, samp: e.samp, maxTokens: maxTokens, ids: make([]int32, 0, maxTokens), plain: !speculate || e.spec == nil, decoding: true, opens: opens}
	start = time.Now()
	g.advance(g.samp.sample(e.rt.logits))
	for !g.ended {
		if err = ctx.Err(); err != nil {
			break
		}
		e.specRound(ctx, g)
	}
	if err == nil {
		err = g.err
	}
	return g.ids, prefill, time.Since(start), err
}

// SpecStats returns the speculative-decoding counters (zero when off).
// It runs on the scheduler goroutine.
func (e *Engine) SpecStats(ctx context.Context) (SpecStats, error) {
	var s SpecStats
	err := e.runOnScheduler(ctx, func() {
		if e.spec != nil {
			s = e.spec.stats
		}
	})
	return s, err
}

// Speculative reports which drafter is configured: "draft", "lookup" or "".
func (e *Engine) Speculative() string {
	switch {
	case e.spec == nil:
		return ""
	case e.spec.draft != nil:
		return "draft"
	}
	return "lookup"
}
