// Package scaletest tests the layout of docs/scaling.md: several voxpipe
// servers behind one load balancer. It has tests only.
package scaletest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
)

const (
	rate          = 16000
	conversations = 16
	turnsEach     = 3
)

func newServer(t *testing.T) (*web.Server, *httptest.Server) {
	t.Helper()
	pc := pipeline.DefaultConfig()
	pc.SystemPrompt = "You are a test."
	pc.EarlyStart = pipeline.EarlyStartOff
	be := pipeline.Backends{ASR: sessiontest.ASR{Text: "hello there"}, LLM: sessiontest.LLM{Answer: "Hello to you."}, TTS: sessiontest.TTS{}}
	srv, err := web.New(web.Config{MaxSessions: conversations + 8, MaxFrameBytes: 4096, IdleTimeout: time.Minute, Pipeline: pc}, be, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Shutdown(context.Background())
	})
	return srv, hs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startHAProxy balances the two servers with the layout of
// docs/scaling.md: least connections, /healthz checked every 200 ms.
func startHAProxy(t *testing.T, a, b string) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not found (Debian package haproxy): ", err)
	}
	port := freePort(t)
	conf := fmt.Sprintf(`global
  maxconn 256
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 1h
frontend voice
  bind 127.0.0.1:%d
  default_backend voxpipe
backend voxpipe
  balance leastconn
  option httpchk GET /healthz
  http-check expect status 200
  default-server inter 200ms fall 1 rise 2
  server a %s check
  server b %s check
`, port, a, b)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return fmt.Sprintf("127.0.0.1:%d", port)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy not serving on %d within 10 s (%v)", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// speech is turnsEach utterances of a tone with the pauses that end a turn.
func speech() []int16 {
	var pcm []int16
	for range turnsEach {
		pcm = append(pcm, make([]int16, rate*3/10)...)
		pcm = append(pcm, sessiontest.Speech(rate*12/10, 0)...)
		pcm = append(pcm, make([]int16, rate*12/10)...)
	}
	return pcm
}

// TestDrainBehindHAProxy: 16 conversations run through HAProxy over two
// servers; one server is drained (what SIGTERM does with
// server.drain_timeout set) while they talk. Its /healthz turns 503, the
// balancer sends the new sessions to the other server only, and every one
// of the 16 running conversations completes all its turns.
func TestDrainBehindHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: 16 real-time conversations through haproxy")
	}
	srvA, hsA := newServer(t)
	srvB, hsB := newServer(t)
	front := startHAProxy(t, strings.TrimPrefix(hsA.URL, "http://"), strings.TrimPrefix(hsB.URL, "http://"))
	url := "ws://" + front + "/ws"
	pcm := speech()

	type outcome struct {
		res *voiceclient.Result
		err error
	}
	results := make([]outcome, conversations)
	var wg sync.WaitGroup
	for i := range conversations {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			res, err := voiceclient.Run(context.Background(), voiceclient.Config{URL: url, Rate: rate, Timeout: 30 * time.Second}, pcm)
			results[i] = outcome{res, err}
		})
	}
	// Drain A once every conversation runs.
	deadline := time.Now().Add(10 * time.Second)
	for srvA.ActiveSessions()+srvB.ActiveSessions() < conversations {
		if time.Now().After(deadline) {
			t.Fatalf("only %d+%d sessions running after 10 s", srvA.ActiveSessions(), srvB.ActiveSessions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	onA, onB := srvA.ActiveSessions(), srvB.ActiveSessions()
	t.Logf("running: %d on A, %d on B", onA, onB)
	if onA == 0 || onB == 0 {
		t.Fatalf("the balancer put %d on A and %d on B: both should have some", onA, onB)
	}
	srvA.Drain()
	resp, err := http.Get(hsA.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("drained server's /healthz: HTTP %d, want 503", resp.StatusCode)
	}
	time.Sleep(time.Second) // several checks: HAProxy marks A down

	// New conversations while A drains: all on B.
	const late = 4
	lateRes := make([]outcome, late)
	for i := range late {
		wg.Go(func() {
			res, err := voiceclient.Run(context.Background(), voiceclient.Config{URL: url, Rate: rate, Turns: 1, Timeout: 30 * time.Second}, pcm[:len(pcm)/turnsEach])
			lateRes[i] = outcome{res, err}
		})
	}
	wg.Wait()
	for i, o := range results {
		switch {
		case o.err != nil:
			t.Errorf("conversation %d: %v", i, o.err)
		case len(o.res.Turns) != turnsEach:
			t.Errorf("conversation %d: %d turns answered, want %d", i, len(o.res.Turns), turnsEach)
		}
	}
	for i, o := range lateRes {
		if o.err != nil || len(o.res.Turns) != 1 {
			t.Errorf("late conversation %d (during the drain): err %v", i, o.err)
		}
	}
	// A refused none of them itself: HAProxy sent none there.
	if n := testutilCount(t, hsA.URL); n != 0 {
		t.Errorf("the drained server refused %d sessions: the balancer still sent it new ones", n)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srvA.WaitIdle(wctx); err != nil {
		t.Errorf("drained server not idle after its conversations ended: %v", err)
	}
}

// testutilCount reads voxpipe_sessions_rejected_total{reason="shutting_down"}
// from a server's /metrics.
func testutilCount(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(line, `voxpipe_sessions_rejected_total{reason="shutting_down"}`) {
			var v float64
			fmt.Sscanf(strings.TrimSpace(line[strings.LastIndexByte(line, ' '):]), "%g", &v)
			return int(v)
		}
	}
	return 0
}
