package pipeline

import "time"

// EndOfTurn is what a turn's trace says about how its end was decided
// (pipeline/turn) and about a speculative answer. Its fields go into the
// trace event as they are.
type EndOfTurn struct {
	// EOUScore is the end-of-utterance score of the partial in effect when
	// the turn was committed; absent in silence mode or before any partial
	// was scored.
	EOUScore *float64 `json:"eou_score,omitempty"`
	// EndSilenceMs is the silence waited after the last speech frame before
	// the turn was committed.
	EndSilenceMs int `json:"end_silence_ms,omitempty"`
	// Speculative: the answer was started on a pause, before the commit,
	// and its held audio was sent at the commit.
	Speculative bool `json:"speculative,omitempty"`
	// SpeculativeLeadMs is how long before the final transcript the
	// speculative answer started: the head start it had over a normal turn.
	SpeculativeLeadMs *float64 `json:"speculative_lead_ms,omitempty"`
	// PauseFinal: the final transcript was made at the pause the turn
	// ended in (Config.PauseFinal), before the commit.
	PauseFinal bool `json:"pause_final,omitempty"`
	// EndPitch is where the last voiced speech before the commit lay in
	// the speaker's pitch range (0 = its 10th percentile, 1 = its 90th),
	// and Intonation the log-odds that added to EOUScore
	// (pipeline/turn.Config.IntonationCue); absent when the policy does not
	// listen to intonation or the ending was unvoiced.
	EndPitch   *float64 `json:"end_pitch,omitempty"`
	Intonation *float64 `json:"intonation,omitempty"`
}

// setEndpoint records the commit: the silence waited and the score (NaN
// for none).
func (r *traceRec) setEndpoint(silence time.Duration, score float64, scored bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eot.EndSilenceMs = int(silence / time.Millisecond)
	if scored {
		s := score
		r.eot.EOUScore = &s
	}
}

// setIntonation records the ending's pitch and the cue it gave.
func (r *traceRec) setIntonation(endPitch, cue float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eot.EndPitch, r.eot.Intonation = &endPitch, &cue
}

// setPauseFinal marks the final transcript as made at the pause.
func (r *traceRec) setPauseFinal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eot.PauseFinal = true
}

// setSpeculative marks the turn's answer as speculative, started lead
// before the final transcript.
func (r *traceRec) setSpeculative(lead time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := durationMs(lead)
	r.eot.Speculative, r.eot.SpeculativeLeadMs = true, &ms
}
