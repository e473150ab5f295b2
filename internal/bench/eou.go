package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// voxpipe bench eou: how well the end-of-utterance scorer tells complete
// utterances from cut-off ones, and what each end-of-turn policy would cost
// a person on that text: the silence waited after a complete utterance
// (what heard latency pays for the turn to end) and the share of pauses of
// 300-1200 ms after a cut-off partial that would end the turn too soon. It
// needs no audio: it runs in seconds, so a retrained scorer or a new
// threshold can be judged before the slow, noisy `voxpipe bench turns`.

const benchEOUUsage = `usage: voxpipe bench eou [flags]

Scores a labelled text set (label TAB text [TAB pause ms [TAB end pitch TAB
slope TAB voiced frames]]; 1 = a complete utterance, 0 = a partial that goes
on, after a pause of that length if given; "-" = not known)
with the end-of-utterance model and prints its AUC and, for the configured
policy and a grid around it, the wait after complete utterances (p50/p95) and
the false cut-off rate: the share of the measured pauses that outlast the
wait, or of 300-1200 ms pauses where none was measured. bench asr --pauses
writes such a set from real recordings, with the intonation before each
pause: then the same policies are judged again with the intonation cue
(pipeline.turn.intonation_yield and intonation_hold, and a grid of them).
`

// The pauses inside a turn that the cut-off rate assumes: uniform over the
// range voxpipe bench turns and issue 11 use.
const eouPauseMinMs, eouPauseMaxMs = 300.0, 1200.0

// EOUPolicy is one wait policy's cost on the set (bench eou --json).
type EOUPolicy struct {
	Threshold    float64 `json:"threshold"`
	DoubtMs      int     `json:"doubt_ms"`
	MaxSilenceMs int     `json:"max_silence_ms"`
	WaitP50Ms    float64 `json:"complete_wait_p50_ms"`
	WaitP95Ms    float64 `json:"complete_wait_p95_ms"`
	WaitMeanMs   float64 `json:"complete_wait_mean_ms"`
	CutOffRate   float64 `json:"false_cutoff_rate"`
	// The intonation cue's weights (log-odds); 0 and 0 = text only.
	IntonationYield float64 `json:"intonation_yield,omitempty"`
	IntonationHold  float64 `json:"intonation_hold,omitempty"`
	Configured      bool    `json:"configured,omitempty"`
}

// EOUReport is what bench eou --json prints.
type EOUReport struct {
	Model       string      `json:"model"`
	File        string      `json:"file"`
	Complete    int         `json:"complete"`
	CutOff      int         `json:"cut_off"`
	AUC         float64     `json:"auc"`
	CompleteP10 float64     `json:"complete_score_p10"`
	CompleteP50 float64     `json:"complete_score_p50"`
	CutOffP90   float64     `json:"cut_off_score_p90"`
	CutOffP95   float64     `json:"cut_off_score_p95"`
	MsPerText   float64     `json:"ms_per_text"`
	Policies    []EOUPolicy `json:"policies"`
}

type eouExample struct {
	complete bool
	text     string
	pauseMs  float64 // the pause that followed a cut-off partial; NaN when not known
	// The intonation before the pause (bench asr --pauses); Voiced 0 and
	// Range NaN when not known.
	contour audio.Contour
}

func (w *Wiring) runBenchEOU(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench eou", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchEOUUsage); fs.PrintDefaults() }
	cfgPath := fs.String("config", w.DefaultConfig, "config file (the policy and pipeline.turn.model)")
	var sets multiFlag
	fs.Var(&sets, "set", "key=value config override (repeatable)")
	model := fs.String("model", "", "GGUF scorer (default: pipeline.turn.model)")
	file := fs.String("file", "internal/bench/testdata/eou-everyday.tsv", "labelled texts: label TAB text [TAB pause ms] (bench asr --pauses writes one from real speech)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	cfg, err := w.LoadConfig(*cfgPath, "", sets)
	if err != nil {
		return err
	}
	if *model == "" {
		*model = cfg.Pipeline.Turn.Model
	}
	exs, err := readEOUSet(*file)
	if err != nil {
		return err
	}
	lm, err := endturn.OpenLM(*model, max(1, cfg.Pipeline.Turn.Threads), 1)
	if err != nil {
		return err
	}
	defer func() { _ = lm.Close() }()

	var (
		pos, neg, negPause []float64
		posK, negK         []audio.Contour
		intoned            int
	)
	started := time.Now()
	for _, e := range exs {
		if !math.IsNaN(e.contour.Range) {
			intoned++
		}
		// One cache key: the engine reuses the prefix the texts share, as
		// it does for the growing partials of an utterance.
		s, err := lm.Score(ctx, "bench", e.text)
		if err != nil {
			return fmt.Errorf("bench eou: %q: %w", e.text, err)
		}
		if e.complete {
			pos, posK = append(pos, s), append(posK, e.contour)
		} else {
			neg, negPause, negK = append(neg, s), append(negPause, e.pauseMs), append(negK, e.contour)
		}
	}
	rep := EOUReport{Model: *model, File: *file, Complete: len(pos), CutOff: len(neg), AUC: aucOf(pos, neg),
		CompleteP10: percentile(pos, 0.10), CompleteP50: percentile(pos, 0.5),
		CutOffP90: percentile(neg, 0.90), CutOffP95: percentile(neg, 0.95),
		MsPerText: float64(time.Since(started)) / float64(time.Millisecond) / float64(len(exs))}
	t := cfg.Pipeline.Turn
	base := endturn.Config{Mode: endturn.ModeSemantic, MinSilenceMs: t.MinSilenceMs, MaxSilenceMs: t.MaxSilenceMs,
		Threshold: t.Threshold, DoubtMs: t.DoubtMs, IntonationYield: t.IntonationYield, IntonationHold: t.IntonationHold}
	cued := func(c endturn.Config, scores []float64, ks []audio.Contour) []float64 {
		out := make([]float64, len(scores))
		for i, s := range scores {
			out[i] = endturn.WithCue(s, c.IntonationCue(ks[i]))
		}
		return out
	}
	policy := func(c endturn.Config, configured bool) EOUPolicy {
		p := eouPolicyOf(c, cued(c, pos, posK), cued(c, neg, negK), negPause, configured)
		p.IntonationYield, p.IntonationHold = c.IntonationYield, c.IntonationHold
		return p
	}
	rep.Policies = append(rep.Policies, policy(base, true))
	if intoned > 0 {
		// The configured text policy under other intonation weights.
		for _, yield := range []float64{0, 0.5, 1, 2} {
			for _, hold := range []float64{0, 0.6, 1.2, 2} {
				c := base
				c.IntonationYield, c.IntonationHold = yield, hold
				rep.Policies = append(rep.Policies, policy(c, false))
			}
		}
	}
	base.IntonationYield, base.IntonationHold = 0, 0 // the text grid
	for _, maxMs := range []int{800, 1000, 1300} {
		for _, th := range []float64{0.1, 0.2, 0.3, 0.5} {
			for _, doubt := range []int{400, 800} {
				c := base
				c.MaxSilenceMs, c.Threshold, c.DoubtMs = max(maxMs, c.MinSilenceMs), th, doubt
				rep.Policies = append(rep.Policies, policy(c, false))
			}
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s on %s: %d complete, %d cut off, AUC %.3f, %.2f ms a text\n", rep.Model, rep.File,
		rep.Complete, rep.CutOff, rep.AUC, rep.MsPerText)
	fmt.Fprintf(stdout, "scores: complete p10 %.3f p50 %.3f; cut off p90 %.3f p95 %.3f\n",
		rep.CompleteP10, rep.CompleteP50, rep.CutOffP90, rep.CutOffP95)
	fmt.Fprintf(stdout, "%d of the texts carry the intonation before them\n", intoned)
	fmt.Fprintf(stdout, "%-10s %6s %6s %5s %5s | %-30s | %s\n", "threshold", "doubt", "max", "yield", "hold", "wait after complete p50/mean/p95", "false cut-offs (at the measured pauses, else 300-1200 ms)")
	for _, p := range rep.Policies {
		mark := ""
		if p.Configured {
			mark = "  <- configured"
		}
		fmt.Fprintf(stdout, "%-10.2f %6d %6d %5.1f %5.1f | %9.0f / %5.0f / %5.0f ms   | %5.1f%%%s\n", p.Threshold, p.DoubtMs, p.MaxSilenceMs,
			p.IntonationYield, p.IntonationHold, p.WaitP50Ms, p.WaitMeanMs, p.WaitP95Ms, 100*p.CutOffRate, mark)
	}
	return nil
}

// eouPolicyOf applies c's wait to every score: complete utterances pay the
// wait; a cut-off partial ends the turn too soon when the person's pause
// outlasts it: the pause measured in the recording when the set has one
// (bench asr --pauses), else uniform over 300-1200 ms.
func eouPolicyOf(c endturn.Config, pos, neg, negPause []float64, configured bool) EOUPolicy {
	waits := make([]float64, len(pos))
	var sum float64
	for i, s := range pos {
		waits[i] = float64(c.Wait(s)) / float64(time.Millisecond)
		sum += waits[i]
	}
	var cut float64
	for i, s := range neg {
		w := float64(c.Wait(s)) / float64(time.Millisecond)
		switch p := negPause[i]; {
		case math.IsNaN(p):
			cut += min(1, max(0, (eouPauseMaxMs-w)/(eouPauseMaxMs-eouPauseMinMs)))
		case p > w:
			cut++
		}
	}
	if len(neg) > 0 {
		cut /= float64(len(neg))
	}
	return EOUPolicy{Threshold: c.Threshold, DoubtMs: c.DoubtMs, MaxSilenceMs: c.MaxSilenceMs,
		WaitP50Ms: percentile(waits, 0.5), WaitP95Ms: percentile(waits, 0.95),
		WaitMeanMs: sum / float64(max(1, len(waits))), CutOffRate: cut, Configured: configured}
}

// aucOf is the probability that a complete utterance scores above a cut-off
// one (ties count half).
func aucOf(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	n := sort.Float64Slice(append([]float64(nil), neg...))
	n.Sort()
	var sum float64
	for _, p := range pos {
		below := sort.SearchFloat64s(n, p)                                // neg < p
		upTo := sort.Search(len(n), func(i int) bool { return n[i] > p }) // neg <= p
		sum += float64(below) + float64(upTo-below)/2
	}
	return sum / float64(len(pos)*len(neg))
}

func readEOUSet(path string) ([]eouExample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench eou: %w", err)
	}
	defer func() { _ = f.Close() }()
	var exs []eouExample
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) < 2 || (cols[0] != "0" && cols[0] != "1") || strings.TrimSpace(cols[1]) == "" ||
			(len(cols) != 2 && len(cols) != 3 && len(cols) != 6) {
			return nil, fmt.Errorf("bench eou: %s:%d: want 0 or 1, a tab, the text, and optionally a tab and the pause in ms, "+
				"then three tabbed intonation columns", path, line)
		}
		e := eouExample{complete: cols[0] == "1", text: strings.TrimSpace(cols[1]), pauseMs: math.NaN(),
			contour: audio.Contour{Range: math.NaN()}}
		num := func(i int, what string, lo float64) (float64, error) {
			v := strings.TrimSpace(cols[i])
			if v == "-" {
				return math.NaN(), nil
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= lo) {
				return 0, fmt.Errorf("bench eou: %s:%d: %s %q: want a number (or -)", path, line, what, v)
			}
			return f, nil
		}
		var err error
		if len(cols) >= 3 {
			if e.pauseMs, err = num(2, "pause ms", 0); err != nil {
				return nil, err
			}
		}
		if len(cols) == 6 {
			var voiced float64
			if e.contour.Range, err = num(3, "end pitch", math.Inf(-1)); err != nil {
				return nil, err
			}
			if e.contour.Slope, err = num(4, "slope", math.Inf(-1)); err != nil {
				return nil, err
			}
			if voiced, err = num(5, "voiced frames", 0); err != nil {
				return nil, err
			}
			e.contour.Voiced = int(voiced)
		}
		exs = append(exs, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench eou: %s: %w", path, err)
	}
	if len(exs) == 0 {
		return nil, fmt.Errorf("bench eou: %s: no labelled texts", path)
	}
	return exs, nil
}
