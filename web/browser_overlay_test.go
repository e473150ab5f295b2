package web

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tools/timer"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// TestBrowserDeviceOverlay: after a xiaozhi device's turn, the page (not
// connected itself) lists the device's session in the latency overlay's
// "traces of" picker; picking it shows that turn's heard figure and
// waterfall with a row for the turn's tool call, and picking "this page"
// again clears them. The screenshot goes to out/web-browser/overlay-device.png.
func TestBrowserDeviceOverlay(t *testing.T) {
	chromium, node, scriptDir := browserPrereqs(t)
	checkLeaks(t)
	ts, _ := newTimerServer(t, &manualClock{}, func(c *Config) {
		xc := xiaozhi.DefaultConfig()
		c.Xiaozhi = &xc
		c.MaxFrameBytes = 65536
	})
	_, synth := engines(t)
	speech := append(make([]int16, 16000/4), speak(t, synth, "set a timer for one minute")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const deviceID = "24:0a:c4:00:00:2a"
	res, err := voiceclient.RunXiaozhi(ctx, voiceclient.XiaozhiConfig{OTAURL: ts.http.URL + "/xiaozhi/ota/", DeviceID: deviceID, Turns: 1}, speech)
	if err != nil || len(res.Turns) != 1 {
		t.Fatalf("device turn: %v", err)
	}
	waitIdle(t, ts.srv)

	shot := filepath.Join(browserOutDir(t), "overlay-device.png")
	cmd := exec.CommandContext(ctx, node, filepath.Join(scriptDir, "overlay.mjs"), ts.http.URL+"/", shot)
	cmd.Dir = scriptDir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("overlay.mjs: %v\n%s\n%s", err, stdout, stderr.String())
	}
	var got struct {
		Error   string `json:"error"`
		Options []struct {
			Value, Text string
		} `json:"options"`
		Source       string           `json:"source"`
		SourceTraces []pipeline.Event `json:"sourceTraces"`
		V2VText      string           `json:"v2vText"`
		TurnText     string           `json:"turnText"`
		Bars         int              `json:"bars"`
		ToolRows     []string         `json:"toolRows"`
		ToolBars     int              `json:"toolBars"`
		PageV2VText  string           `json:"pageV2VText"`
		Logs         []string         `json:"logs"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("overlay.mjs output %q: %v", stdout, err)
	}
	for _, l := range got.Logs {
		t.Log("page: " + l)
	}
	if got.Error != "" {
		t.Fatalf("page: %s", got.Error)
	}
	if len(got.Options) != 2 || got.Options[0].Value != "" || !strings.Contains(got.Options[1].Text, deviceID) {
		t.Fatalf("picker %+v, want this page and the device %s", got.Options, deviceID)
	}
	if got.Source != got.Options[1].Value || len(got.SourceTraces) != 1 {
		t.Fatalf("source %q with %d traces, want the device session's 1", got.Source, len(got.SourceTraces))
	}
	tr := got.SourceTraces[0]
	heard, ok := tr.Marks[pipeline.MarkPlaybackStart]
	if !ok {
		t.Fatalf("device trace without playback_start: %v", tr.Marks)
	}
	if shown, err := strconv.Atoi(got.V2VText); err != nil || math.Abs(float64(shown)-heard) > 1 {
		t.Errorf("overlay shows %q ms, want the device turn's heard %.0f", got.V2VText, heard)
	}
	if got.Bars < 5 || !strings.Contains(got.TurnText, "xiaozhi "+deviceID) || !strings.Contains(got.TurnText, "cache off") {
		t.Errorf("waterfall has %d bars, turn line %q", got.Bars, got.TurnText)
	}
	if len(tr.Tools) != 1 || tr.Tools[0].Name != timer.SetName || tr.Tools[0].Outcome != "ok" {
		t.Fatalf("device trace's tools %+v, want one set_timer call that ended ok", tr.Tools)
	}
	if len(got.ToolRows) != 1 || got.ToolRows[0] != timer.SetName || got.ToolBars != 1 {
		t.Errorf("waterfall tool rows %q with %d bars, want one %s row", got.ToolRows, got.ToolBars, timer.SetName)
	}
	if got.PageV2VText != "–" {
		t.Errorf("back on this page, the overlay shows %q, want – (no turn of its own)", got.PageV2VText)
	}
}
