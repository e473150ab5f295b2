package web

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
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
	StatusText    string          `json:"statusText"`
	NoticeText    string          `json:"noticeText"`
	RTCInbound    json.RawMessage `json:"rtcInbound"`
	WaterfallRows int             `json:"waterfallRows"`
	Logs          []string        `json:"logs"`
}

// TestBrowser opens the page in headless Chromium (playwright-core) with a
// flite-spoken WAV as the microphone: the page connects over WebRTC (or,
// when /rtc/offer fails, falls back to the WebSocket), the question is
// recognised, the answer streams and plays, and the overlay shows a
// voice-to-voice figure. Screenshots go to out/web-browser/.
func TestBrowser(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		rtcBroken       bool
	}{{"webrtc", "webrtc", false}, {"fallback", "websocket", true}} {
		t.Run(tc.name, func(t *testing.T) { testBrowser(t, tc.name, tc.transport, tc.rtcBroken) })
	}
}

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

func testBrowser(t *testing.T, name, wantTransport string, rtcBroken bool) {
	browserPrereqs(t)
	checkLeaks(t)

	const question = "what is the weather like today"
	const answer = "It is sunny and warm today. Enjoy the day."
	var edit func(*Config)
	if lead := os.Getenv("VOXPIPE_BROWSER_LEAD_MS"); lead != "" { // to measure the pacer's lead
		ms, err := strconv.Atoi(lead)
		if err != nil {
			t.Fatalf("VOXPIPE_BROWSER_LEAD_MS=%q: %v", lead, err)
		}
		edit = func(cfg *Config) { cfg.Pipeline.OutputLeadMs = ms }
	}
	ts := rtcTestServer(t, []string{answer}, edit)
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

	// The microphone: a second of silence, the question, then silence so
	// the server's VAD ends the turn.
	const rate = 48000
	mic := append(utterance(t, question, rate), make([]int16, 3*rate)...)
	mic = append(make([]int16, rate), mic...)
	wavPath := filepath.Join(t.TempDir(), "question.wav")
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
	res := runBrowser(t, pageURL+query, wavPath, shot)
	t.Logf("screenshot: %s; page's inbound-rtp stats %s", shot, res.RTCInbound)

	if res.State.Transport != wantTransport {
		t.Errorf("page connected over %q, want %s", res.State.Transport, wantTransport)
	}
	transcript := res.State.Transcripts["1"]
	ref, hyp := asrtest.Words(question), asrtest.Words(transcript.Text)
	if errs, n := asrtest.WER(ref, hyp); !transcript.Final || float64(errs)/float64(n) > 0.5 {
		t.Errorf("transcript %+v: WER %d/%d against %q", transcript, errs, n, question)
	}
	if got := strings.Join(strings.Fields(res.State.Answers["1"]), " "); got != answer {
		t.Errorf("answer %q, want %q", got, answer)
	}
	if res.State.AudioPlayedMs <= 0 {
		t.Error("the page never heard the answer audio")
	}
	if len(res.State.Traces) == 0 {
		t.Fatal("no trace reached the page")
	}
	trace := res.State.Traces[0]
	checkTraceOrder(t, trace)
	if _, ok := trace.Marks[pipeline.MarkPlaybackStart]; !ok {
		t.Errorf("trace lacks the page's playback_start: %v", trace.Marks)
	}
	if v, err := strconv.Atoi(res.V2VText); err != nil || v <= 0 {
		t.Errorf("overlay shows heard %q, want a positive number of ms", res.V2VText)
	} else {
		// The big number is the page's own heard figure: its playback_start
		// (first audible sample played) since speech_end.
		if ps := trace.Marks[pipeline.MarkPlaybackStart]; v != int(ps+0.5) {
			t.Errorf("overlay shows %d ms, the page's playback_start is %.1f ms", v, ps)
		}
		server := -1.0
		if trace.HeardMs != nil {
			server = *trace.HeardMs
		}
		t.Logf("browser over %s: heard %d ms (server %.0f ms); first answer event to audible %d ms; jitter buffer %v ms (target set to %v); marks %v",
			res.State.Transport, v, server, res.State.HeardAfterMs["1"], jb(res.State.JitterBuffer), jbTarget(res.State.JitterTarget), trace.Marks)
	}
	if res.WaterfallRows != 6 {
		t.Errorf("waterfall has %d rows, want 6", res.WaterfallRows)
	}
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
