package pipeline

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// The semantic end of turn. The turn manager hands every partial transcript
// to the end-of-utterance stage (a mailbox of one: a newer partial replaces
// one not yet scored), which scores it off the audio path and publishes the
// silence the turn now needs (endturn.Config.Wait) in an endWait. Audio-in
// reads that with one atomic load per frame and ends the utterance once the
// VAD's silence run reaches it; the VAD's own end (MaxSilenceMs) ends it
// anyway.

// endWait is the latest decision for the utterance in progress: its number,
// the wait in ms and the score, packed into one word so that audio-in reads
// it without a lock or an allocation.
type endWait struct{ v atomic.Uint64 }

const noScore = 0xffff

func (w *endWait) store(utt int, wait time.Duration, score float64) {
	ms := min(uint64(wait/time.Millisecond), 0xffff)
	q := uint64(noScore)
	if !math.IsNaN(score) {
		q = uint64(math.Round(max(0, min(1, score)) * (noScore - 1)))
	}
	w.v.Store(uint64(uint32(utt))<<32 | ms<<16 | q)
}

// load returns the decision for utterance utt; ok is false when there is
// none (no partial of it scored yet).
func (w *endWait) load(utt int) (waitMs int, score float64, ok bool) {
	v := w.v.Load()
	if v == 0 || uint32(v>>32) != uint32(utt) {
		return 0, math.NaN(), false
	}
	score = math.NaN()
	if q := v & 0xffff; q != noScore {
		score = float64(q) / (noScore - 1)
	}
	return int(v >> 16 & 0xffff), score, true
}

// eouJob asks for a partial's score.
type eouJob struct {
	utt  int
	text string
}

// eouStage scores partials one at a time.
type eouStage struct {
	scorer endturn.Scorer
	cfg    endturn.Config
	key    string // the session: the scorer keeps its cache under it
	wait   *endWait
	log    zerolog.Logger
}

func (e *eouStage) run(ctx context.Context, jobs <-chan eouJob) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case j, ok := <-jobs:
			if !ok {
				return nil
			}
			started := time.Now()
			score, err := e.scorer.Score(ctx, e.key, j.text)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// The VAD's MaxSilenceMs still ends the turn.
				e.log.Debug().Err(err).Msg("end-of-utterance scoring failed")
				continue
			}
			wait := e.cfg.Wait(score)
			e.wait.store(j.utt, wait, score)
			e.log.Trace().Str("partial", j.text).Float64("score", score).Dur("wait", wait).
				Dur("took", time.Since(started)).Msg("end of utterance scored")
		}
	}
}

// offerEOU hands the partial to the end-of-utterance stage, replacing one
// still waiting there. The hub is the only sender, so after the drain the
// send cannot block.
func (h *hub) offerEOU(utt int, text string) {
	if h.eou == nil {
		return
	}
	select {
	case <-h.eou:
	default:
	}
	h.eou <- eouJob{utt: utt, text: text}
}
