package web

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/internal/questions"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// browserResult is what testdata/browser/talk.mjs prints.
type browserResult struct {
	Error string `json:"error"`
	State struct {
		Status      string `json:"status"`
		Transport   string `json:"transport"`
		Transcripts map[string]struct {
			Text  string `json:"text"`
			Final bool   `json:"final"`
		} `json:"transcripts"`
		Answers       map[string]string `json:"answers"`
		Traces        []pipeline.Event  `json:"traces"`
		AudioPlayedMs float64           `json:"audioPlayedMs"`
		Errors        []pipeline.Event  `json:"errors"`
		HeardAfterMs  map[string]int    `json:"heardAfterMs"`
		JitterBuffer  *int              `json:"jitterBufferMs"`
		JitterTarget  *float64          `json:"jitterBufferTarget"`
	} `json:"state"`
	V2VText       string          `json:"v2vText"`
	WaterfallRows int             `json:"waterfallRows"`
	FirstOverlay  *browserOverlay `json:"firstOverlay"` // the overlay after the first trace
	StatusText    string          `json:"statusText"`
	NoticeText    string          `json:"noticeText"`
	RTCInbound    json.RawMessage `json:"rtcInbound"`
	Logs          []string        `json:"logs"`
}

// browserOverlay is what the overlay shows: the big number and how many
// waterfall rows there are.
type browserOverlay struct {
	V2VText       string `json:"v2vText"`
	WaterfallRows int    `json:"waterfallRows"`
}

// TestBrowser opens the page in headless Chromium (playwright-core) with a
// flite-spoken WAV as the microphone: the page connects over WebRTC (or,
// when /rtc/offer fails, falls back to the WebSocket), each question is
// recognised, the answer streams and plays, and the overlay shows a
// voice-to-voice figure. The WebRTC case asks every browserQuestions in one
// session and reports heard (the page's playback_start − speech_end) per
// turn and its p50/p95, beside the server's heard and the browser's share;
// the fallback asks the first. Both run the turn policy the server ships
// (semantic, speculative answers); VOXPIPE_BROWSER_TURN=silence measures
// the fixed vad.end_silence_ms wait instead. Screenshots go to
// out/web-browser/.
func TestBrowser(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		rtcBroken       bool
		questions       []string
	}{{"webrtc", "webrtc", false, browserQuestions}, {"fallback", "websocket", true, browserQuestions[:1]}} {
		t.Run(tc.name, func(t *testing.T) { testBrowser(t, tc.name, tc.transport, tc.rtcBroken, tc.questions) })
	}
}

// browserQuestions are spoken in this order. Every assertion of the first
// turn is on the first; the rest are the first six complete questions of
// voxpipe bench turns, taken as they come, not for how well they are
// recognised.
var browserQuestions = append([]string{"what is the weather like today"}, questions.Complete[:6]...)

// The first turn's answer, and a shorter one for every later turn so that
// the next question can follow sooner.
const (
	browserAnswer      = "It is sunny and warm today. Enjoy the day."
	browserLaterAnswer = "Sure, here is what I found."
)

// browserPrereqs returns the paths of Chromium, node and the node script's
// directory, or skips the test.
func browserPrereqs(t *testing.T) (chromium, node, scriptDir string) {
	t.Helper()
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("requires chromium (apt-get install chromium): %s not found", chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("requires node: not found in PATH")
	}
	scriptDir, err = filepath.Abs(filepath.Join("testdata", "browser"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(scriptDir, "node_modules", "playwright-core")); err != nil {
		t.Skipf("requires playwright-core: node_modules absent (run: cd %s && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci)", scriptDir)
	}
	return chromium, node, scriptDir
}

// runBrowser runs talk.mjs against pageURL with wavPath as the microphone.
func runBrowser(t *testing.T, pageURL, wavPath, shot string, env ...string) browserResult {
	t.Helper()
	chromium, node, scriptDir := browserPrereqs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(scriptDir, "talk.mjs"), pageURL, wavPath, shot)
	cmd.Dir = scriptDir
	cmd.Env = append(append(os.Environ(), "CHROMIUM="+chromium, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("talk.mjs: %v\n%s\n%s", err, stdout, stderr.String())
	}
	var res browserResult
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("talk.mjs output %q: %v", stdout, err)
	}
	for _, l := range res.Logs {
		t.Log("page: " + l)
	}
	if res.Error != "" {
		t.Fatalf("page: %s (status %q)", res.Error, res.State.Status)
	}
	return res
}

// browserOutDir is where screenshots go (out/ is ignored by git).
func browserOutDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(t), "out", "web-browser")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func testBrowser(t *testing.T, name, wantTransport string, rtcBroken bool, questions []string) {
	browserPrereqs(t)
	checkLeaks(t)

	answers := []string{browserAnswer, browserLaterAnswer}
	turnCfg := endturn.DefaultConfig()
	var eou endturn.Scorer
	switch mode := os.Getenv("VOXPIPE_BROWSER_TURN"); mode {
	case "", string(endturn.ModeSemantic):
		lm, err := endturn.OpenLM(filepath.Join(testenv.RepoRoot(t), "models", "voxpipe-eou-q8_0.gguf"), 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lm.Close() })
		eou = lm
	case string(endturn.ModeSilence):
		turnCfg = endturn.Config{Mode: endturn.ModeSilence}
	default:
		t.Fatalf("VOXPIPE_BROWSER_TURN=%q: want semantic or silence", mode)
	}
	lead := -1
	if s := os.Getenv("VOXPIPE_BROWSER_LEAD_MS"); s != "" { // to measure the pacer's lead
		ms, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("VOXPIPE_BROWSER_LEAD_MS=%q: %v", s, err)
		}
		lead = ms
	}
	// Answers by turn: a discarded speculative answer shifts nothing.
	model := &scriptedModel{answers: answers, perTurn: true}
	ts := newTestServerWith(t, model, eou, func(cfg *Config) {
		cfg.RTC.IncludeLoopback = true
		cfg.Pipeline.Turn = turnCfg
		cfg.Pipeline.Speculative = eou != nil // as configs/default.yaml ships it
		if lead >= 0 {
			cfg.Pipeline.OutputLeadMs = lead
		}
	})
	pageURL := ts.http.URL
	if rtcBroken {
		// A proxy that refuses WebRTC, as a UDP-blocking network would.
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/rtc/offer" {
				http.Error(w, "webrtc unavailable here", http.StatusBadGateway)
				return
			}
			ts.srv.Handler().ServeHTTP(w, r)
		}))
		t.Cleanup(proxy.Close)
		pageURL = proxy.URL
	}

	const rate = 48000
	mic := browserMic(t, questions, answers, rate)
	wavPath := filepath.Join(t.TempDir(), "questions.wav")
	var wav bytes.Buffer
	if err := audio.EncodeWAV(&wav, mic, rate, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wavPath, wav.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(browserOutDir(t), name+".png")
	query := "/?autoconnect=1&always=1"
	if jbt := os.Getenv("VOXPIPE_BROWSER_JBT"); jbt != "" {
		query += "&jbt=" + jbt // "default": leave the receiver's jitter buffer target to the browser
	}
	wavMs := len(mic) * 1000 / rate
	res := runBrowser(t, pageURL+query, wavPath, shot,
		"TALK_TURNS="+strconv.Itoa(len(questions)), "TALK_TIMEOUT_MS="+strconv.Itoa(wavMs+60000))
	t.Logf("screenshot: %s; page's inbound-rtp stats %s", shot, res.RTCInbound)

	if res.State.Transport != wantTransport {
		t.Errorf("page connected over %q, want %s", res.State.Transport, wantTransport)
	}
	transcript := res.State.Transcripts["1"]
	ref, hyp := asrtest.Words(questions[0]), asrtest.Words(transcript.Text)
	if errs, n := asrtest.WER(ref, hyp); !transcript.Final || float64(errs)/float64(n) > 0.5 {
		t.Errorf("transcript %+v: WER %d/%d against %q", transcript, errs, n, questions[0])
	}
	if got := strings.Join(strings.Fields(res.State.Answers["1"]), " "); got != browserAnswer {
		t.Errorf("answer %q, want %q", got, browserAnswer)
	}
	if res.State.AudioPlayedMs <= 0 {
		t.Error("the page never heard the answer audio")
	}
	if len(res.State.Traces) == 0 {
		t.Fatal("no trace reached the page")
	}
	traces := append([]pipeline.Event(nil), res.State.Traces...)
	sort.SliceStable(traces, func(i, j int) bool { return traces[i].Turn < traces[j].Turn })
	trace := traces[0]
	if trace.Turn != 1 {
		t.Fatalf("the first trace is turn %d's, want turn 1", trace.Turn)
	}
	checkTraceOrder(t, trace)
	if _, ok := trace.Marks[pipeline.MarkPlaybackStart]; !ok {
		t.Errorf("trace lacks the page's playback_start: %v", trace.Marks)
	}
	// The big number is the page's own heard figure: its playback_start
	// (first audible sample played) since speech_end, as the first turn
	// left it and as the last one did.
	if res.FirstOverlay == nil {
		t.Fatal("talk.mjs did not read the overlay after the first turn")
	}
	checkOverlay(t, "after turn 1", *res.FirstOverlay, trace)
	checkOverlay(t, "at the end", browserOverlay{res.V2VText, res.WaterfallRows}, res.State.Traces[len(res.State.Traces)-1])
	t.Logf("browser over %s: turn 1 first answer event to audible %d ms; jitter buffer %v ms (target set to %v); marks %v",
		res.State.Transport, res.State.HeardAfterMs["1"], jb(res.State.JitterBuffer), jbTarget(res.State.JitterTarget), trace.Marks)
	reportHeard(t, res, traces, len(questions))
}

// browserMic is the microphone: a second of silence, then each question
// followed by silence long enough for the longest end-of-turn wait and the
// whole answer to play, so that no question talks over an answer.
func browserMic(t *testing.T, questions, answers []string, rate int) []int16 {
	t.Helper()
	_, synth := engines(t)
	mic := make([]int16, rate)
	for i, q := range questions {
		answer := speak(t, synth, answers[min(i, len(answers)-1)])
		answerMs := len(answer) * 1000 / synth.SampleRate()
		gapMs := endturn.DefaultConfig().MaxSilenceMs + answerMs + 500
		mic = append(mic, utterance(t, q, rate)...)
		mic = append(mic, make([]int16, gapMs*rate/1000)...)
	}
	return mic
}

// checkOverlay checks that the overlay's big number is trace's
// playback_start and that its waterfall has a row per mark.
func checkOverlay(t *testing.T, when string, ov browserOverlay, trace pipeline.Event) {
	t.Helper()
	if v, err := strconv.Atoi(ov.V2VText); err != nil || v <= 0 {
		t.Errorf("overlay %s shows heard %q, want a positive number of ms", when, ov.V2VText)
	} else if ps := trace.Marks[pipeline.MarkPlaybackStart]; v != int(ps+0.5) {
		t.Errorf("overlay %s shows %d ms, turn %d's playback_start is %.1f ms", when, v, trace.Turn, ps)
	}
	if ov.WaterfallRows != 6 {
		t.Errorf("waterfall %s has %d rows, want 6", when, ov.WaterfallRows)
	}
}

// reportHeard logs each turn's heard figure as the page measured it, the
// server's (trace heard_ms) and the browser's share (their difference),
// then their p50 and p95 over the turns. Every answered turn must carry
// the page's playback_start.
func reportHeard(t *testing.T, res browserResult, traces []pipeline.Event, questions int) {
	t.Helper()
	if len(traces) != questions {
		t.Logf("%d questions gave %d turns (a question split or merged by the end-of-turn decision)", questions, len(traces))
	}
	var page, server, share []float64
	for _, tr := range traces {
		key := strconv.Itoa(tr.Turn)
		if strings.TrimSpace(res.State.Answers[key]) == "" {
			t.Errorf("turn %d: the page got no answer text", tr.Turn)
		}
		ps, ok := tr.Marks[pipeline.MarkPlaybackStart]
		if !ok || tr.HeardMs == nil {
			t.Errorf("turn %d: no heard figure (playback_start %v, heard_ms %v)", tr.Turn, ok, tr.HeardMs)
			continue
		}
		page, server, share = append(page, ps), append(server, *tr.HeardMs), append(share, ps-*tr.HeardMs)
		score := "-"
		if tr.EOUScore != nil {
			score = strconv.FormatFloat(*tr.EOUScore, 'f', 2, 64)
		}
		t.Logf("turn %d %q: heard %.0f ms = server %.0f ms + browser %.0f ms (end-of-turn wait %d ms, score %s, speculative %v, interrupted %v)",
			tr.Turn, res.State.Transcripts[key].Text, ps, *tr.HeardMs, ps-*tr.HeardMs, tr.EndSilenceMs, score, tr.Speculative, tr.Interrupted)
	}
	if len(page) == 0 {
		return
	}
	t.Logf("browser over %s, %d turns: heard p50 %.0f ms p95 %.0f ms; server heard p50 %.0f ms p95 %.0f ms; browser's share p50 %.0f ms p95 %.0f ms; jitter buffer %v ms (target set to %v)",
		res.State.Transport, len(page), percentile(page, 0.5), percentile(page, 0.95), percentile(server, 0.5), percentile(server, 0.95),
		percentile(share, 0.5), percentile(share, 0.95), jb(res.State.JitterBuffer), jbTarget(res.State.JitterTarget))
}

// percentile is the nearest-rank p-quantile of v (0 < p <= 1), as voxpipe
// bench turns computes it.
func percentile(v []float64, p float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(len(s)-1, i))]
}

func jbTarget(ms *float64) any {
	if ms == nil {
		return "not set"
	}
	return *ms
}

func jb(ms *int) any {
	if ms == nil {
		return "unknown"
	}
	return *ms
}

// TestBrowserBusy opens the page while the only session slot is taken: it
// must say the server is busy.
func TestBrowserBusy(t *testing.T) {
	browserPrereqs(t)
	checkLeaks(t)
	ts := rtcTestServer(t, nil, func(cfg *Config) { cfg.MaxSessions = 1 })
	ws := dial(t, ts.url)
	sendJSON(t, ws, startMsg(16000, EncodingPCM16))
	expectReady(t, ws)
	wavPath := filepath.Join(t.TempDir(), "silence.wav")
	var wav bytes.Buffer
	if err := audio.EncodeWAV(&wav, make([]int16, 48000), 48000, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wavPath, wav.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runBrowser(t, ts.http.URL+"/?autoconnect=1", wavPath, filepath.Join(browserOutDir(t), "busy.png"), "TALK_EXPECT=busy")
	if !strings.Contains(strings.ToLower(res.NoticeText), "busy") || res.StatusText != "server busy" {
		t.Errorf("page status %q, notice %q; want a server-busy message", res.StatusText, res.NoticeText)
	}
	stopAndExpectClose(t, ws)
	waitIdle(t, ts.srv)
}
