package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/voxpipe/voxpipe/pipeline"
)

// report is what --json prints: the shape, each level with more
// fields beside the required ones.
type report struct {
	Results []levelStats `json:"results"`
	// MaxWithinSLO is the largest N that met withinSLO (0 if none did).
	MaxWithinSLO int `json:"max_sessions_within_slo"`
	SLOMs        int `json:"slo_ms"`
	// SingleWER is the WER of the 1-session level (the baseline the
	// others are compared to), -1 when no such level ran.
	SingleWER float64 `json:"single_session_wer_pct"`
}

// withinSLO: every session admitted and served without errors or dropped
// frames, heard p95 within the SLO, and no transcript worse than the same
// question's at one session (Regressed, set by countRegressions).
func withinSLO(st levelStats, sloMs int) bool {
	if st.Admitted < st.Sessions || st.Errors > 0 || st.DroppedFrames != 0 || st.Turns == 0 || st.NoAnswer > 0 {
		return false
	}
	if st.HeardP95 > float64(sloMs) {
		return false
	}
	return st.Regressed == 0
}

// countRegressions sets each level's Regressed: turns whose word error
// rate is above their question's baseline, its rate at one session (the
// worst of the 1-session turns that asked it), else its best at any level.
func countRegressions(levels []levelStats) {
	single, best := map[string]float64{}, map[string]float64{}
	for _, st := range levels {
		for _, t := range st.scoredTurns {
			if b, ok := best[t.ref]; !ok || t.rate() < b {
				best[t.ref] = t.rate()
			}
			if st.Sessions == 1 {
				single[t.ref] = max(single[t.ref], t.rate())
			}
		}
	}
	for i := range levels {
		st := &levels[i]
		if st.scoredTurns == nil {
			continue // loaded from JSON: keep the count it had
		}
		st.Regressed = 0
		for _, t := range st.scoredTurns {
			base, ok := single[t.ref]
			if !ok {
				base = best[t.ref]
			}
			if t.rate() > base+1e-9 {
				st.Regressed++
			}
		}
	}
}

func finish(levels []levelStats, sloMs int) report {
	r := report{Results: levels, SLOMs: sloMs, SingleWER: -1}
	countRegressions(r.Results)
	for _, st := range levels {
		if st.Sessions == 1 && st.Scored > 0 {
			r.SingleWER = st.WER
		}
	}
	for i := range r.Results {
		st := &r.Results[i]
		st.WithinSLO = withinSLO(*st, sloMs)
		if st.WithinSLO && st.Sessions > r.MaxWithinSLO {
			r.MaxWithinSLO = st.Sessions
		}
	}
	return r
}

func writeJSON(w io.Writer, r report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// stageOrder is the order stage columns print in: the trace vocabulary,
// then any mark voxbench does not know, sorted.
func stageOrder(levels []levelStats) []string {
	seen := map[string]bool{}
	for _, st := range levels {
		for m := range st.Stages {
			seen[m] = true
		}
	}
	var out []string
	for _, m := range pipeline.MarkOrder {
		if seen[m] {
			out = append(out, m)
			delete(seen, m)
		}
	}
	rest := make([]string, 0, len(seen))
	for m := range seen {
		rest = append(rest, m)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// writeTable prints the summary a person reads at the end of a run.
func writeTable(w io.Writer, r report) {
	fmt.Fprintf(w, "\n%-4s %-5s %-16s %-16s %-7s %-6s %-9s %-7s %-6s %-6s %-11s %s\n",
		"N", "turns", "heard p50/95/99", "v2v p50/95/99", "dropped", "errors", "busy/adm", "wrong/reg", "WER%", "cpu", "bench/8", "load")
	for _, st := range r.Results {
		mark := " "
		if st.WithinSLO {
			mark = "*"
		}
		fmt.Fprintf(w, "%-3d%s %-5d %-16s %-16s %-7d %-6d %-9s %-7s %-6.1f %-6.2f %-11s %.1f→%.1f\n",
			st.Sessions, mark, st.Turns,
			fmt.Sprintf("%.0f/%.0f/%.0f", st.HeardP50, st.HeardP95, st.HeardP99),
			fmt.Sprintf("%.0f/%.0f/%.0f", st.V2VP50, st.V2VP95, st.V2VP99),
			st.DroppedFrames, st.Errors, fmt.Sprintf("%d/%d", st.Busy, st.Admitted),
			fmt.Sprintf("%d/%d", st.WrongTranscripts, st.Regressed), st.WER, st.ServerCPU,
			fmt.Sprintf("%.1f%%", 100*st.BenchCPU), st.Load[0], st.Load[1])
	}
	fmt.Fprintf(w, "* within the %d ms SLO; largest N within it: %d\n", r.SLOMs, r.MaxWithinSLO)
	for _, st := range r.Results {
		if c := st.Cache; c != nil {
			fmt.Fprintf(w, "answer cache at N=%d: %d hits, %d misses, %d off (hit rate %.1f%%); heard p50/p95 hits %.0f/%.0f ms, misses %.0f/%.0f ms, off %.0f/%.0f ms; after the end-of-turn wait hits %.0f/%.0f ms, misses %.0f/%.0f ms\n",
				st.Sessions, c.Hits, c.Misses, c.Off, c.HitRatePct, c.HitHeard.P50, c.HitHeard.P95, c.MissHeard.P50, c.MissHeard.P95, c.OffHeard.P50, c.OffHeard.P95,
				c.HitAfterEOT.P50, c.HitAfterEOT.P95, c.MissAfterEOT.P50, c.MissAfterEOT.P95)
		}
	}
	stages := stageOrder(r.Results)
	if len(stages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstages, ms since speech_end, p50/p95:\n%-4s", "N")
	for _, m := range stages {
		fmt.Fprintf(w, " %-17s", m)
	}
	fmt.Fprintln(w)
	for _, st := range r.Results {
		fmt.Fprintf(w, "%-4d", st.Sessions)
		for _, m := range stages {
			s, ok := st.Stages[m]
			cell := "-"
			if ok {
				cell = fmt.Sprintf("%.0f/%.0f", s.P50, s.P95)
			}
			fmt.Fprintf(w, " %-17s", cell)
		}
		fmt.Fprintln(w)
	}
	for _, st := range r.Results {
		if len(st.ErrorsByCode) > 0 {
			fmt.Fprintf(w, "errors at N=%d: %v\n", st.Sessions, st.ErrorsByCode)
		}
		for _, wt := range st.Wrong {
			fmt.Fprintf(w, "wrong at N=%d: %q heard as %q\n", st.Sessions, wt.Ref, wt.Got)
		}
	}
}

// intervalOrder lists the intervals of the levels in the trace's order.
func intervalOrder(levels []levelStats) []string {
	rank := map[string]int{}
	for i, m := range pipeline.MarkOrder {
		rank[m] = i
	}
	seen := map[string]bool{}
	var out []string
	for _, st := range levels {
		for k := range st.Intervals {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		af, at, _ := strings.Cut(a, ">")
		bf, bt, _ := strings.Cut(b, ">")
		if rank[af] != rank[bf] {
			return rank[af] - rank[bf]
		}
		return rank[at] - rank[bt]
	})
	return out
}

// writeIntervals prints the per-turn interval table (markdown).
func writeIntervals(w io.Writer, levels []levelStats) {
	ivs := intervalOrder(levels)
	if len(ivs) == 0 {
		return
	}
	fmt.Fprint(w, "\nWhere heard goes, turn by turn: the time between consecutive marks, ms, p50 / p95:\n\n| sessions |")
	for _, k := range ivs {
		fmt.Fprintf(w, " %s |", strings.ReplaceAll(k, ">", " → "))
	}
	fmt.Fprint(w, "\n|---|")
	for range ivs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, st := range levels {
		fmt.Fprintf(w, "| %d |", st.Sessions)
		for _, k := range ivs {
			if s, ok := st.Intervals[k]; ok {
				fmt.Fprintf(w, " %.0f / %.0f |", s.P50, s.P95)
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
}

// writeMarkdown prints the tables of docs/performance.md.
func writeMarkdown(w io.Writer, r report) {
	fmt.Fprintln(w, "| sessions | turns | heard p50 / p95 / p99 (ms) | server v2v p50 / p95 / p99 (ms) | dropped frames | errors | busy | wrong transcripts (WER) | worse than at 1 session | server CPU (cores) | voxbench CPU per 8 sessions | load avg | within SLO |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, st := range r.Results {
		slo := "no"
		if st.WithinSLO {
			slo = "yes"
		}
		fmt.Fprintf(w, "| %d | %d | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %d | %d | %d | %d/%d (%.1f%%) | %d | %.2f | %.1f%% | %.1f–%.1f | %s |\n",
			st.Sessions, st.Turns, st.HeardP50, st.HeardP95, st.HeardP99, st.V2VP50, st.V2VP95, st.V2VP99,
			st.DroppedFrames, st.Errors, st.Busy, st.WrongTranscripts, st.Scored, st.WER, st.Regressed, st.ServerCPU,
			100*st.BenchCPU, st.Load[0], st.Load[1], slo)
	}
	fmt.Fprintf(w, "\nLargest N within the %d ms SLO: **%d**.\n", r.SLOMs, r.MaxWithinSLO)
	writeIntervals(w, r.Results)
	stages := stageOrder(r.Results)
	if len(stages) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "Each mark, ms after the server's speech_end, p50 / p95 (each over the turns that have it):\n\n| sessions |")
	for _, m := range stages {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprint(w, "\n|---|")
	for range stages {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, st := range r.Results {
		fmt.Fprintf(w, "| %d |", st.Sessions)
		for _, m := range stages {
			if s, ok := st.Stages[m]; ok {
				fmt.Fprintf(w, " %.0f / %.0f |", s.P50, s.P95)
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
}

// writePlot draws heard and server v2v (p50 and p95) against sessions as
// an SVG line chart, with the SLO as a dashed line.
func writePlot(path string, r report) error {
	const (
		width, height = 640.0, 400.0
		left, right   = 64.0, 150.0
		top, bottom   = 30.0, 50.0
	)
	if len(r.Results) == 0 {
		return fmt.Errorf("--plot: no levels to draw")
	}
	maxN, maxMs := 1.0, float64(r.SLOMs)
	for _, st := range r.Results {
		maxN = math.Max(maxN, float64(st.Sessions))
		maxMs = math.Max(maxMs, math.Max(st.HeardP95, st.V2VP95))
	}
	maxMs = niceCeil(maxMs * 1.05)
	x := func(n float64) float64 { return left + (n/maxN)*(width-left-right) }
	y := func(ms float64) float64 { return height - bottom - (ms/maxMs)*(height-top-bottom) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">voxbench: latency vs concurrent sessions</text>`+"\n", left)
	// axes and ticks
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y(0), x(maxN), y(0))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y(0), left, y(maxMs))
	for i := 0; i <= 5; i++ {
		ms := maxMs * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n",
			left, y(ms), x(maxN), y(ms), left-6, y(ms)+4, ms)
	}
	for _, st := range r.Results {
		n := float64(st.Sessions)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(n), y(0)+16, st.Sessions)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">sessions</text>`+"\n", (left+x(maxN))/2, height-12)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">ms</text>`+"\n", (top+y(0))/2, (top+y(0))/2)
	// SLO
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red" stroke-dasharray="6 4"/>`+"\n", left, y(float64(r.SLOMs)), x(maxN), y(float64(r.SLOMs)))
	series := []struct {
		name, color, dash string
		val               func(levelStats) float64
	}{
		{"heard p95", "#1f77b4", "", func(s levelStats) float64 { return s.HeardP95 }},
		{"heard p50", "#1f77b4", "4 3", func(s levelStats) float64 { return s.HeardP50 }},
		{"server v2v p95", "#ff7f0e", "", func(s levelStats) float64 { return s.V2VP95 }},
		{"server v2v p50", "#ff7f0e", "4 3", func(s levelStats) float64 { return s.V2VP50 }},
	}
	for i, s := range series {
		var pts []string
		for _, st := range r.Results {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(st.Sessions)), y(s.val(st))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>`+"\n", s.color, s.dash, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
		}
		ly := top + 20 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			width-right+10, ly, width-right+34, ly, s.color, s.dash, width-right+40, ly+4, s.name)
	}
	ly := top + 20 + float64(len(series))*18
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red" stroke-dasharray="6 4"/><text x="%.1f" y="%.1f">SLO %d ms</text>`+"\n",
		width-right+10, ly, width-right+34, ly, width-right+40, ly+4, r.SLOMs)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
