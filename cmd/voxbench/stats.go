package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/voxpipe/voxpipe/pipeline"
)

// turnResult is what a device measured for one turn.
type turnResult struct {
	Session int
	Turn    int // the server's turn number
	// Ref is what was said (empty when unknown), Transcript what the
	// server's final ASR made of it, Answer the streamed answer text.
	Ref, Transcript, Answer string
	// HeardMs: first audible answer sample received − last speech sample
	// sent, measured by the device; nil when no answer audio came.
	HeardMs *float64
	// V2VMs is the server's first_audio_out − speech_end (trace event).
	V2VMs *float64
	// Marks are the trace's milliseconds since the server's speech_end.
	Marks       map[string]float64
	Interrupted bool
	// The trace event's prompt tokens (all, cached, prefilled early) and
	// the LLM's time-to-first-token split, for --turns-out.
	PromptTokens, CachedTokens, EarlyTokens int
	TTFTMs                                  map[string]float64
	// Code is the error event's code when the turn failed ("" = none).
	Code string
	// Cache is the trace's answer cache outcome: hit, miss, off ("": none
	// reported); EndSilenceMs the trace's end-of-turn wait (the silence
	// waited after the last speech before the turn was committed).
	Cache        string
	EndSilenceMs int
}

// levelStats summarises one level (N sessions).
type levelStats struct {
	Sessions int `json:"sessions"`
	Turns    int `json:"turns"`

	HeardP50 float64 `json:"heard_p50_ms"`
	HeardP95 float64 `json:"heard_p95_ms"`
	HeardP99 float64 `json:"heard_p99_ms"`
	V2VP50   float64 `json:"v2v_p50_ms"`
	V2VP95   float64 `json:"v2v_p95_ms"`
	V2VP99   float64 `json:"v2v_p99_ms"`

	DroppedFrames  int            `json:"dropped_frames"`
	BufferedFrames int            `json:"buffered_frames,omitempty"`
	Errors         int            `json:"errors"`
	ErrorsByCode   map[string]int `json:"errors_by_code,omitempty"`
	Busy           int            `json:"busy_rejections"`
	Admitted       int            `json:"sessions_admitted"`

	// Stages: p50/p95 of every trace mark (ms since speech_end).
	Stages map[string]stageStats `json:"stages,omitempty"`
	// Intervals: p50/p95 of the time between consecutive marks of a turn,
	// keyed "from>to" (per turn, so they add up to where heard goes).
	Intervals map[string]stageStats `json:"intervals,omitempty"`

	// Transcripts: turns with a reference, those whose final transcript
	// differs from it, and the word error rate over them (percent).
	Scored           int     `json:"scored_turns"`
	WrongTranscripts int     `json:"wrong_transcripts"`
	WER              float64 `json:"wer_pct"`

	ServerCPU   float64    `json:"server_cpu_cores"`       // process_cpu_seconds_total / wall
	BenchCPU    float64    `json:"voxbench_cpu_per_8"`     // voxbench's own CPU, cores per 8 sessions
	WallSeconds float64    `json:"wall_s"`                 // the level's duration
	Load        [2]float64 `json:"load_avg"`               // 1-minute load average at start and end
	WithinSLO   bool       `json:"within_slo"`             // see withinSLO
	Interrupted int        `json:"interrupted,omitempty"`  // turns cut by barge-in
	NoAnswer    int        `json:"no_answer,omitempty"`    // turns with no audible answer
	HeardAll    []float64  `json:"heard_ms_all,omitempty"` // every turn's heard, in turn order
	// Wrong lists up to 10 transcripts that differ from their reference.
	Wrong []wrongTranscript `json:"wrong,omitempty"`
	// Regressed counts turns whose transcript is worse than the same
	// question's at one session (finish; a question the 1-session level
	// did not ask is compared with its best transcript at any level).
	Regressed int `json:"regressed_transcripts"`

	// Cache splits the turns by the answer cache's outcome; nil when no
	// turn reported one (a server without the field).
	Cache *cacheStats `json:"cache,omitempty"`

	scoredTurns []scoredTurn // per turn, for Regressed
}

// cacheStats are a level's answer cache figures: the outcome counts, the
// hit rate over the turns that reported one, and heard latency of hits and
// of misses apart (same run, same load).
type cacheStats struct {
	Hits       int        `json:"hits"`
	Misses     int        `json:"misses"`
	Off        int        `json:"off"`
	HitRatePct float64    `json:"hit_rate_pct"`
	HitHeard   stageStats `json:"hit_heard"`
	MissHeard  stageStats `json:"miss_heard"`
	OffHeard   stageStats `json:"off_heard"`
	// HitAfterEOT and MissAfterEOT are heard less the turn's end-of-turn
	// wait (end_silence_ms): what the answer cost after the turn was
	// committed, which is all a cache can save.
	HitAfterEOT  stageStats `json:"hit_after_end_of_turn"`
	MissAfterEOT stageStats `json:"miss_after_end_of_turn"`
}

// summariseCache fills st.Cache from turns.
func summariseCache(turns []turnResult) *cacheStats {
	var c cacheStats
	heard, after := map[string][]float64{}, map[string][]float64{}
	for _, t := range turns {
		switch t.Cache {
		case pipeline.CacheHit:
			c.Hits++
		case pipeline.CacheMiss:
			c.Misses++
		case pipeline.CacheOff:
			c.Off++
		default:
			continue
		}
		if t.HeardMs != nil {
			heard[t.Cache] = append(heard[t.Cache], *t.HeardMs)
			if t.EndSilenceMs > 0 {
				after[t.Cache] = append(after[t.Cache], *t.HeardMs-float64(t.EndSilenceMs))
			}
		}
	}
	n := c.Hits + c.Misses + c.Off
	if n == 0 {
		return nil
	}
	c.HitRatePct = round1(100 * float64(c.Hits) / float64(n))
	stats := func(v []float64) stageStats { return stageStats{P50: pct(v, 50), P95: pct(v, 95)} }
	c.HitHeard, c.MissHeard, c.OffHeard = stats(heard[pipeline.CacheHit]), stats(heard[pipeline.CacheMiss]), stats(heard[pipeline.CacheOff])
	c.HitAfterEOT, c.MissAfterEOT = stats(after[pipeline.CacheHit]), stats(after[pipeline.CacheMiss])
	return &c
}

// scoredTurn is one turn's word errors against its reference.
type scoredTurn struct {
	ref         string
	errs, words int
}

// rate is the turn's word error rate.
func (t scoredTurn) rate() float64 { return float64(t.errs) / float64(max(t.words, 1)) }

type wrongTranscript struct {
	Ref string `json:"ref"`
	Got string `json:"got"`
}

type stageStats struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
}

// summarise computes a level's latency and transcript figures from its turns.
func summarise(n int, turns []turnResult) levelStats {
	st := levelStats{Sessions: n, Turns: len(turns), ErrorsByCode: map[string]int{}, Stages: map[string]stageStats{},
		Intervals: map[string]stageStats{}}
	intervals := map[string][]float64{}
	var heard, v2v []float64
	marks := map[string][]float64{}
	var errWords, refWords int
	for _, t := range turns {
		if t.Code != "" {
			st.Errors++
			st.ErrorsByCode[t.Code]++
		}
		if t.Interrupted {
			st.Interrupted++
		}
		if t.HeardMs != nil {
			heard = append(heard, *t.HeardMs)
			st.HeardAll = append(st.HeardAll, math.Round(*t.HeardMs))
		} else if t.Code == "" && !t.Interrupted {
			st.NoAnswer++
		}
		if t.V2VMs != nil {
			v2v = append(v2v, *t.V2VMs)
		}
		for m, ms := range t.Marks {
			marks[m] = append(marks[m], ms)
		}
		prev, prevMs := "", 0.0
		for _, m := range pipeline.MarkOrder {
			ms, ok := t.Marks[m]
			if !ok {
				continue
			}
			if prev != "" && prev != pipeline.MarkSpeechStart {
				intervals[prev+">"+m] = append(intervals[prev+">"+m], ms-prevMs)
			}
			prev, prevMs = m, ms
		}
		if t.Ref != "" {
			e, w := wordErrors(t.Ref, t.Transcript)
			st.Scored++
			st.scoredTurns = append(st.scoredTurns, scoredTurn{ref: t.Ref, errs: e, words: w})
			errWords += e
			refWords += w
			if e > 0 {
				st.WrongTranscripts++
				if len(st.Wrong) < 10 {
					st.Wrong = append(st.Wrong, wrongTranscript{Ref: t.Ref, Got: t.Transcript})
				}
			}
		}
	}
	st.HeardP50, st.HeardP95, st.HeardP99 = pct(heard, 50), pct(heard, 95), pct(heard, 99)
	st.V2VP50, st.V2VP95, st.V2VP99 = pct(v2v, 50), pct(v2v, 95), pct(v2v, 99)
	for m, v := range marks {
		if m == pipeline.MarkSpeechStart || m == pipeline.MarkSpeechEnd {
			continue
		}
		st.Stages[m] = stageStats{P50: pct(v, 50), P95: pct(v, 95)}
	}
	for k, v := range intervals {
		st.Intervals[k] = stageStats{P50: pct(v, 50), P95: pct(v, 95)}
	}
	if refWords > 0 {
		st.WER = round1(100 * float64(errWords) / float64(refWords))
	}
	st.Cache = summariseCache(turns)
	return st
}

// pct is the p-th percentile of v (nearest rank), rounded to 0.1 ms; 0 for
// no values.
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = min(max(rank, 0), len(s)-1)
	return round1(s[rank])
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// normWords lower-cases s and splits it into words, dropping punctuation
// (the recogniser's output has none; references are written text).
func normWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

// wordErrors returns the word-level edit distance between the reference
// and the hypothesis, and the reference's length in words.
func wordErrors(ref, hyp string) (errs, words int) {
	r, h := normWords(ref), normWords(hyp)
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(h)], len(r)
}

// turnLine is one turn as --turns-out writes it.
type turnLine struct {
	Sessions    int                `json:"sessions"` // the level
	Session     int                `json:"session"`
	Turn        int                `json:"turn"`
	Ref         string             `json:"ref,omitempty"`
	Transcript  string             `json:"transcript"`
	Answer      string             `json:"answer"`
	HeardMs     *float64           `json:"heard_ms"`
	V2VMs       *float64           `json:"v2v_ms"`
	Marks       map[string]float64 `json:"marks,omitempty"`
	Interrupted bool               `json:"interrupted,omitempty"`
	Code        string             `json:"code,omitempty"`

	PromptTokens int                `json:"prompt_tokens,omitempty"`
	CachedTokens int                `json:"cached_tokens,omitempty"`
	EarlyTokens  int                `json:"early_tokens,omitempty"`
	TTFTMs       map[string]float64 `json:"ttft_ms,omitempty"`
	Cache        string             `json:"cache,omitempty"`
	EndSilenceMs int                `json:"end_silence_ms,omitempty"`
}

// writeTurns writes a level's turns to w as JSON lines, in session and
// turn order; a write error is reported on progress and ends the writing.
func writeTurns(w io.Writer, level int, turns []turnResult, progress io.Writer) {
	ts := slices.Clone(turns)
	slices.SortStableFunc(ts, func(a, b turnResult) int {
		if a.Session != b.Session {
			return a.Session - b.Session
		}
		return a.Turn - b.Turn
	})
	enc := json.NewEncoder(w)
	for _, t := range ts {
		l := turnLine{Sessions: level, Session: t.Session, Turn: t.Turn, Ref: t.Ref, Transcript: t.Transcript,
			Answer: t.Answer, HeardMs: t.HeardMs, V2VMs: t.V2VMs, Marks: t.Marks, Interrupted: t.Interrupted, Code: t.Code,
			PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, EarlyTokens: t.EarlyTokens, TTFTMs: t.TTFTMs,
			Cache: t.Cache, EndSilenceMs: t.EndSilenceMs}
		if err := enc.Encode(l); err != nil {
			fmt.Fprintf(progress, "\r\033[K--turns-out: %v\n", err)
			return
		}
	}
}
