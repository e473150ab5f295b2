package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWordErrors(t *testing.T) {
	for _, c := range []struct {
		ref, hyp    string
		errs, words int
	}{
		{"Today only platforms one and three are used.", "today only platforms one and three are used", 0, 8},
		{"today only platforms one and three are used", "today only reforms one and the wheel used", 3, 8},
		{"what is a compiler", "", 4, 4},
		{"", "noise", 1, 0},
		{"what's your name?", "what's your name", 0, 3},
		{"a b c", "a x b c", 1, 3},
	} {
		e, w := wordErrors(c.ref, c.hyp)
		if e != c.errs || w != c.words {
			t.Errorf("wordErrors(%q, %q) = %d, %d; want %d, %d", c.ref, c.hyp, e, w, c.errs, c.words)
		}
	}
}

func TestPct(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if got := pct(v, 50); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := pct(v, 95); got != 10 {
		t.Errorf("p95 = %v, want 10", got)
	}
	if got := pct(nil, 95); got != 0 {
		t.Errorf("p95 of nothing = %v", got)
	}
	if v[0] != 5 {
		t.Error("pct sorted its argument")
	}
}

func ms(v float64) *float64 { return &v }

func TestSummariseAndSLO(t *testing.T) {
	one := summarise(1, []turnResult{
		{Ref: "what is a compiler", Transcript: "what is a compiler", HeardMs: ms(400), V2VMs: ms(300),
			Marks: map[string]float64{"asr_final": 20, "first_audio_out": 300, "speech_start": -900}},
	})
	one.Admitted = 1
	eight := summarise(8, []turnResult{
		{Ref: "what is a compiler", Transcript: "what is the compiler", HeardMs: ms(700), V2VMs: ms(600)},
		{Ref: "tell me a joke", Transcript: "tell me a joke", HeardMs: ms(900), V2VMs: ms(800)},
		{Code: "busy"},
	})
	eight.Admitted = 8
	if eight.Errors != 1 || eight.ErrorsByCode["busy"] != 1 {
		t.Errorf("errors %d %v", eight.Errors, eight.ErrorsByCode)
	}
	if eight.WrongTranscripts != 1 || eight.Scored != 2 || eight.WER != 12.5 {
		t.Errorf("wrong %d of %d, WER %v; want 1 of 2, 12.5", eight.WrongTranscripts, eight.Scored, eight.WER)
	}
	if _, ok := one.Stages["speech_start"]; ok {
		t.Error("speech_start is the reference, not a stage")
	}
	if one.Stages["asr_final"].P95 != 20 {
		t.Errorf("stages %v", one.Stages)
	}
	r := finish([]levelStats{one, eight}, 800)
	if !r.Results[0].WithinSLO || r.Results[1].WithinSLO || r.MaxWithinSLO != 1 {
		t.Errorf("within SLO %v %v, max %d", r.Results[0].WithinSLO, r.Results[1].WithinSLO, r.MaxWithinSLO)
	}
	// The JSON shape.
	var buf bytes.Buffer
	if err := writeJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	res := got["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"sessions", "turns", "heard_p50_ms", "heard_p95_ms", "v2v_p50_ms", "v2v_p95_ms", "dropped_frames", "errors"} {
		if _, ok := res[k]; !ok {
			t.Errorf("results[0] lacks %q", k)
		}
	}
	if got["max_sessions_within_slo"] != 1.0 {
		t.Errorf("max_sessions_within_slo = %v", got["max_sessions_within_slo"])
	}
	// A dropped frame or an unknown count (-1) is never within the SLO.
	one.DroppedFrames = -1
	if withinSLO(one, 800) {
		t.Error("unknown dropped frames counted as none")
	}
}

func TestReportOutputs(t *testing.T) {
	st := summarise(2, []turnResult{{HeardMs: ms(500), V2VMs: ms(400), Marks: map[string]float64{"asr_final": 30, "zz_custom": 1}}})
	st.Admitted = 2
	r := finish([]levelStats{st}, 800)
	var tbl, md bytes.Buffer
	writeTable(&tbl, r)
	writeMarkdown(&md, r)
	if !strings.Contains(tbl.String(), "500/500/500") || !strings.Contains(md.String(), "| 2 | 1 | 500 / 500 / 500 |") {
		t.Errorf("table:\n%s\nmarkdown:\n%s", tbl.String(), md.String())
	}
	if strings.Index(md.String(), "asr_final") > strings.Index(md.String(), "zz_custom") {
		t.Error("known marks should come first")
	}
	path := filepath.Join(t.TempDir(), "p.svg")
	if err := writePlot(path, r); err != nil {
		t.Fatal(err)
	}
	svg, _ := os.ReadFile(path)
	if !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("SLO 800 ms")) || bytes.Count(svg, []byte("<polyline")) != 4 {
		t.Errorf("svg:\n%s", svg)
	}
}

func TestMetricsURLAndParse(t *testing.T) {
	for in, want := range map[string]string{
		"ws://127.0.0.1:8080/ws":    "http://127.0.0.1:8080/metrics",
		"wss://h.example/ws?x=1":    "https://h.example/metrics",
		"http://127.0.0.1:18700":    "http://127.0.0.1:18700/metrics",
		"http://127.0.0.1:18700/ws": "http://127.0.0.1:18700/metrics",
	} {
		if got, err := metricsURL(in); err != nil || got != want {
			t.Errorf("metricsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := metricsURL("ftp://x"); err == nil {
		t.Error("ftp accepted")
	}
	name, labels, v, ok := parseSample(`voxpipe_sessions_rejected_total{reason="busy"} 3`)
	if !ok || name != "voxpipe_sessions_rejected_total" || labels != `{reason="busy"}` || v != 3 {
		t.Errorf("parseSample: %q %q %v %v", name, labels, v, ok)
	}
	if name, _, v, ok := parseSample("process_cpu_seconds_total 12.5"); !ok || name != "process_cpu_seconds_total" || v != 12.5 {
		t.Errorf("parseSample plain: %q %v %v", name, v, ok)
	}
}

func TestDocSections(t *testing.T) {
	doc := []byte("# P\n<!-- bench:voxbench -->\nold\n<!-- /bench:voxbench -->\ntail\n")
	got, err := replaceSection(doc, "voxbench", "| new |\n")
	if err != nil || string(got) != "# P\n<!-- bench:voxbench -->\n| new |\n<!-- /bench:voxbench -->\ntail\n" {
		t.Errorf("replaceSection: %q, %v", got, err)
	}
	if _, err := replaceSection(doc, "gobench", "x"); err == nil {
		t.Error("a missing section was not reported")
	}
	tbl := goBenchTable([]byte("goos: linux\npkg: github.com/voxpipe/voxpipe/pipeline/audio\nBenchmarkVAD-2   \t  1000\t  1234 ns/op\t  0 B/op\t  0 allocs/op\nPASS\n"))
	if !strings.Contains(tbl, "| pipeline/audio | BenchmarkVAD-2 | 1234 | 0 | 0 |") {
		t.Errorf("goBenchTable:\n%s", tbl)
	}
}

func TestRegressions(t *testing.T) {
	one := summarise(1, []turnResult{{Ref: "what is a compiler", Transcript: "what is a pimple"}})
	eight := summarise(8, []turnResult{
		{Ref: "what is a compiler", Transcript: "what is a pimple"},        // as bad as alone: not a regression
		{Ref: "what is a compiler", Transcript: "what is a pimple or who"}, // worse
		{Ref: "who made you", Transcript: "who made you"},
		{Ref: "who made you", Transcript: "two made you"}, // worse than its best (not asked alone)
	})
	levels := []levelStats{one, eight}
	countRegressions(levels)
	if levels[0].Regressed != 0 || levels[1].Regressed != 2 {
		t.Errorf("regressed %d, %d; want 0, 2", levels[0].Regressed, levels[1].Regressed)
	}
}

func TestIntervals(t *testing.T) {
	st := summarise(1, []turnResult{{HeardMs: ms(1), Marks: map[string]float64{
		"speech_start": -900, "speech_end": 0, "asr_final": 40, "llm_request": 41, "llm_first_token": 60}}})
	want := map[string]float64{"speech_end>asr_final": 40, "asr_final>llm_request": 1, "llm_request>llm_first_token": 19}
	if len(st.Intervals) != len(want) {
		t.Errorf("intervals %v, want %v", st.Intervals, want)
	}
	for k, v := range want {
		if st.Intervals[k].P50 != v {
			t.Errorf("%s = %v, want %v", k, st.Intervals[k].P50, v)
		}
	}
	var md bytes.Buffer
	writeMarkdown(&md, finish([]levelStats{st}, 800))
	if !strings.Contains(md.String(), "| speech_end → asr_final | asr_final → llm_request | llm_request → llm_first_token |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

// TestSameQuestions: by default session i starts at question i; with
// --same-questions every session asks the 1-session level's questions in
// its order.
func TestSameQuestions(t *testing.T) {
	qs := []question{{ref: "a"}, {ref: "b"}, {ref: "c"}, {ref: "d"}}
	seq := func(b *bench, i int) string {
		p := b.plan(i, time.Time{}, nil)
		var s string
		for k := range p.turns {
			s += p.question(k).ref
		}
		return s
	}
	b := &bench{o: options{turns: 3}, qs: qs}
	if got := seq(b, 0) + "," + seq(b, 2); got != "abc,cda" {
		t.Errorf("rotated plans %s, want abc,cda", got)
	}
	b.o.sameQuestions = true
	if got := seq(b, 0) + "," + seq(b, 2); got != "abc,abc" {
		t.Errorf("--same-questions plans %s, want abc,abc", got)
	}
}

// TestWriteTurns: --turns-out writes one JSON line per turn, in session and
// turn order, with the trace's marks, prompt tokens and TTFT split.
func TestWriteTurns(t *testing.T) {
	turns := []turnResult{
		{Session: 1, Turn: 1, Transcript: "b", HeardMs: ms(700), PromptTokens: 35, CachedTokens: 34},
		{Session: 0, Turn: 2, Transcript: "a2", TTFTMs: map[string]float64{"ttft_queue": 3}},
		{Session: 0, Turn: 1, Transcript: "a1", Marks: map[string]float64{"asr_final": 512}},
	}
	var buf, progress bytes.Buffer
	writeTurns(&buf, 2, turns, &progress)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || progress.Len() != 0 {
		t.Fatalf("lines %q, progress %q", lines, progress.String())
	}
	var got []turnLine
	for _, l := range lines {
		var tl turnLine
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			t.Fatal(err)
		}
		got = append(got, tl)
	}
	if got[0].Transcript != "a1" || got[1].Transcript != "a2" || got[2].Transcript != "b" {
		t.Errorf("order %+v", got)
	}
	if got[0].Sessions != 2 || got[0].Marks["asr_final"] != 512 || got[1].TTFTMs["ttft_queue"] != 3 ||
		got[2].HeardMs == nil || *got[2].HeardMs != 700 || got[2].PromptTokens != 35 || got[2].CachedTokens != 34 {
		t.Errorf("fields %+v", got)
	}
	if got[0].HeardMs != nil || !strings.Contains(lines[0], `"heard_ms":null`) {
		t.Errorf("a turn without audio: %s", lines[0])
	}
}
