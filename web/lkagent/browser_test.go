package lkagent

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
)

// TestBrowserInARoom: headless Chromium joins a LiveKit room with
// livekit-client (npm), a WAV of flite's speech as its fake microphone;
// the agent is dispatched, and the page gets the transcript and the trace
// as data packets and hears the answer (Web Audio on the answer track).
func TestBrowserInARoom(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts livekit-server and Chromium")
	}
	chromium := os.Getenv("CHROMIUM")
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
	dir, err := filepath.Abs(filepath.Join("testdata", "browser"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"playwright-core", "livekit-client"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err != nil {
			t.Skipf("requires %s: node_modules absent (make browser-deps, or cd %s && npm ci)", m, dir)
		}
	}
	lk := startLiveKit(t)
	_, synth := engines(t)
	pcm := append(speech(t, synth, "what is the weather like today"), make([]int16, rate*4)...)
	wav := filepath.Join(t.TempDir(), "question.wav")
	if err := voiceclient.SaveWAV(wav, pcm, rate); err != nil {
		t.Fatal(err)
	}
	startWorker(t, lk, nil)

	at := auth.NewAccessToken(testKey, testSecret)
	at.SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: "room-browser"}).SetIdentity("browser").SetValidFor(time.Hour)
	token, err := at.ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(page.Close)
	pageURL := page.URL + "/room.html?" + url.Values{"url": {lk.url}, "token": {token}}.Encode()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "room.mjs"), pageURL, wav)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("room.mjs: %v\n%s\n%s", err, stdout, stderr.String())
	}
	var res struct {
		Error string `json:"error"`
		LK    struct {
			Status  string           `json:"status"`
			Events  []pipeline.Event `json:"events"`
			Audible map[string]int   `json:"audible"`
			Errors  []string         `json:"errors"`
		} `json:"lk"`
		Logs []string `json:"logs"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("room.mjs output %q: %v", stdout, err)
	}
	if res.Error != "" || res.LK.Status != "published" || len(res.LK.Errors) > 0 {
		for _, l := range res.Logs {
			t.Log("page: " + l)
		}
		t.Fatalf("page: %s (status %q, errors %v, %d events)", res.Error, res.LK.Status, res.LK.Errors, len(res.LK.Events))
	}
	var final string
	var trace *pipeline.Event
	for i, ev := range res.LK.Events {
		switch {
		case ev.Type == pipeline.EventTranscript && ev.Final && final == "":
			final = ev.Text
		case ev.Type == pipeline.EventTrace && trace == nil:
			trace = &res.LK.Events[i]
		}
	}
	if trace == nil {
		t.Fatal("no trace event reached the page")
	}
	audible := res.LK.Audible[strings.TrimSpace(itoa(trace.Turn))]
	t.Logf("page heard %q, %d audible 20 ms checks of turn %d; marks %v", final, audible, trace.Turn, trace.Marks)
	if !strings.Contains(final, "weather") {
		t.Errorf("final transcript %q, want the word weather", final)
	}
	if audible < 5 {
		t.Errorf("the page heard %d audible checks of the answer, want a spoken sentence", audible)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
