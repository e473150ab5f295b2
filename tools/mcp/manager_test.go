package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tools/mcp/internal/testserver"
)

// testServerBin is the stdio test server, built once by TestMain.
var testServerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-testserver")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testServerBin = filepath.Join(dir, "mcp-testserver")
	out, err := exec.Command("go", "build", "-o", testServerBin, "./internal/testserver/cmd/mcp-testserver").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the test server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// wait is the bound of every poll: generous, the machine is shared.
const wait = 30 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stdio(args ...string) ServerConfig {
	return ServerConfig{Type: "stdio", Command: testServerBin, Args: args}
}

func start(t *testing.T, cfg Config, opts Options) *Manager {
	t.Helper()
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 20 * time.Millisecond
		opts.MaxBackoff = 200 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	m, err := Start(ctx, cfg, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func names(m *Manager) []string {
	var out []string
	for _, t := range m.Tools() {
		out = append(out, t.Spec().Name)
	}
	return out
}

func find(m *Manager, name string) tools.Tool {
	for _, t := range m.Tools() {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

func call(t *testing.T, m *Manager, name, args string) (string, error) {
	t.Helper()
	tl := find(m, name)
	if tl == nil {
		t.Fatalf("no tool %q among %v", name, names(m))
	}
	return tl.Call(context.Background(), tools.Call{Arguments: json.RawMessage(args)})
}

func mustCall(t *testing.T, m *Manager, name, args string) string {
	t.Helper()
	out, err := call(t, m, name, args)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return out
}

func TestStdioTools(t *testing.T) {
	t.Setenv("VOXPIPE_MCP_INHERITED", "from voxpipe")
	sc := stdio()
	sc.Env = map[string]string{"VOXPIPE_MCP_GIVEN": "from config"}
	m := start(t, Config{Servers: map[string]ServerConfig{"t": sc}}, Options{MaxOutputBytes: 1000})

	want := []string{"add", "big", "crash", "dotted_name", "echo", "fail", "getenv", "grow", "image", "pid", "slow"}
	if got := names(m); !slices.Equal(got, want) {
		t.Fatalf("tools: have %v, want %v", got, want)
	}
	spec := find(m, "echo").Spec()
	if spec.Description != "Sends the text back." {
		t.Errorf("description: have %q", spec.Description)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("schema: have %s (%v)", spec.Parameters, err)
	}

	if got := mustCall(t, m, "echo", `{"text":"hello"}`); got != "hello" {
		t.Errorf("echo: have %q", got)
	}
	if got := mustCall(t, m, "add", `{"a":2,"b":3.5}`); got != "5.5" {
		t.Errorf("add: have %q", got)
	}
	if got := mustCall(t, m, "image", ``); got != "a picture\n[image image/png 123 bytes]" {
		t.Errorf("image: have %q", got)
	}
	if got := mustCall(t, m, "dotted_name", `{}`); got != "dotted" {
		t.Errorf("dotted.name (called by its real name): have %q", got)
	}
	if got := mustCall(t, m, "getenv", `{"name":"VOXPIPE_MCP_GIVEN"}`); got != "from config" {
		t.Errorf("env from the config: have %q", got)
	}
	if got := mustCall(t, m, "getenv", `{"name":"VOXPIPE_MCP_INHERITED"}`); got != "from voxpipe" {
		t.Errorf("inherited env: have %q", got)
	}

	_, err := call(t, m, "fail", `{}`)
	var te *ToolError
	if !errors.As(err, &te) || err.Error() != "it failed on purpose" {
		t.Errorf("fail: have %v (%T)", err, err)
	}

	out := mustCall(t, m, "big", `{"bytes":100000}`)
	if len(out) > 1000 || !strings.HasPrefix(out, "xxxx") || !strings.HasSuffix(out, "[truncated: the result was 100000 bytes]") {
		t.Errorf("big: %d bytes, ends %q", len(out), out[max(0, len(out)-60):])
	}
	out = mustCall(t, m, "big", `{"bytes":5000,"char":"日本"}`)
	if len(out) > 1000 || !utf8.ValidString(out) || !strings.Contains(out, "[truncated") {
		t.Errorf("big, multi-byte: %d bytes, valid UTF-8 %v", len(out), utf8.ValidString(out))
	}

	// A protocol-level error (the server rejects the arguments) is an
	// error, and not "unavailable".
	_, err = call(t, m, "add", `{"a":"two"}`)
	if err == nil || errors.Is(err, tools.ErrUnavailable) {
		t.Errorf("bad arguments: have %v", err)
	}
}

func TestCallTimeoutAndCancel(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{"t": stdio()}}, Options{CallTimeout: 300 * time.Millisecond})
	_, err := call(t, m, "slow", `{"ms":60000}`)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow past CallTimeout: have %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = find(m, "slow").Call(ctx, tools.Call{Arguments: json.RawMessage(`{"ms":60000}`)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("slow, cancelled: have %v", err)
	}
	// The server is still there.
	if got := mustCall(t, m, "echo", `{"text":"still here"}`); got != "still here" {
		t.Errorf("echo after timeouts: have %q", got)
	}
	if got := mustCall(t, m, "slow", `{"ms":10}`); got != "slept" {
		t.Errorf("slow within the timeout: have %q", got)
	}
}

func TestCrashRestarts(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{"t": stdio()}}, Options{})
	pid1 := mustCall(t, m, "pid", `{}`)
	pidTool := find(m, "pid") // kept across the restart

	_, err := call(t, m, "crash", `{}`)
	if !errors.Is(err, tools.ErrUnavailable) {
		t.Errorf("crash: have %v, want ErrUnavailable", err)
	}
	var pid2 string
	eventually(t, "the server to come back", func() bool {
		out, err := pidTool.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{}`)})
		if err != nil {
			if !errors.Is(err, tools.ErrUnavailable) {
				t.Errorf("while down: have %v, want ErrUnavailable", err)
			}
			return false
		}
		pid2 = out
		return true
	})
	if pid2 == pid1 {
		t.Errorf("same process %s after the crash", pid1)
	}
	st := m.Status()
	if len(st) != 1 || !st[0].Connected || st[0].Restarts < 1 || st[0].LastErr == nil {
		t.Errorf("status: have %+v", st)
	}
	if !strings.Contains(fmt.Sprint(st[0].LastErr), "crashing on request") {
		t.Errorf("the error does not carry the server's stderr: %v", st[0].LastErr)
	}
	if got := len(names(m)); got != 11 {
		t.Errorf("tools after the restart: have %d", got)
	}
	pid, _ := strconv.Atoi(pid1)
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the crashed process %d is still there", pid)
	}
}

func TestCollisionsArePrefixed(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{
		"alpha":    stdio(),
		"beta.srv": stdio("-tools", "echo,pid"),
	}}, Options{})
	got := names(m)
	for _, want := range []string{"alpha_echo", "beta_srv_echo", "alpha_pid", "beta_srv_pid", "add", "slow"} {
		if !slices.Contains(got, want) {
			t.Errorf("no %q among %v", want, got)
		}
	}
	if slices.Contains(got, "echo") || slices.Contains(got, "pid") {
		t.Errorf("a colliding name is offered bare: %v", got)
	}
	if mustCall(t, m, "alpha_pid", `{}`) == mustCall(t, m, "beta_srv_pid", `{}`) {
		t.Error("both prefixed tools reach the same server")
	}
	if got := mustCall(t, m, "beta_srv_echo", `{"text":"b"}`); got != "b" {
		t.Errorf("beta_srv_echo: have %q", got)
	}
}

func TestAllowList(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{
		"some": stdio(),
		"none": stdio(),
		"all":  stdio("-tools", "grow"),
	}}, Options{Allow: map[string][]string{"some": {"echo", "add", "not-offered"}, "none": {}}})
	got := names(m)
	if want := []string{"add", "echo", "grow"}; !slices.Equal(got, want) {
		t.Errorf("have %v, want %v", got, want)
	}

	_, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{"a": stdio()}},
		Options{Allow: map[string][]string{"b": {"echo"}}}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("allow-list for an unknown server: have %v", err)
	}
}

func TestPaging(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{"t": stdio("-pagesize", "2")}}, Options{})
	if got := len(names(m)); got != len(testserver.All) {
		t.Errorf("have %d tools over pages of 2, want %d: %v", got, len(testserver.All), names(m))
	}
}

func TestListChanged(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{"t": stdio("-tools", "grow,echo")}}, Options{})
	if got := mustCall(t, m, "grow", `{"name":"sprout"}`); got != "added sprout" {
		t.Fatalf("grow: have %q", got)
	}
	eventually(t, "the new tool", func() bool { return find(m, "sprout") != nil })
	if got := mustCall(t, m, "sprout", `{}`); got != "grown sprout" {
		t.Errorf("sprout: have %q", got)
	}
}

func TestMissingCommand(t *testing.T) {
	_, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{
		"gone": {Type: "stdio", Command: "voxpipe-no-such-mcp-server"},
	}}, Options{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), `server "gone"`) || !strings.Contains(err.Error(), "voxpipe-no-such-mcp-server") {
		t.Errorf("have %v", err)
	}
	// Disabled servers are not looked at.
	m, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{
		"gone": {Type: "stdio", Command: "voxpipe-no-such-mcp-server", Disabled: true},
	}}, Options{}, zerolog.Nop())
	if err != nil || len(m.Tools()) != 0 || len(m.Status()) != 0 {
		t.Errorf("disabled: have %v", err)
	}
	_ = m.Close()
}

func TestServerThatCannotStart(t *testing.T) {
	m := start(t, Config{Servers: map[string]ServerConfig{
		"bad":  stdio("-die", "no database configured"),
		"good": stdio("-tools", "echo"),
	}}, Options{})
	if got := names(m); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("tools: have %v", got)
	}
	eventually(t, "restarts with back-off", func() bool {
		st := m.Status()
		return st[0].Restarts >= 3
	})
	st := m.Status()[0]
	if st.Name != "bad" || st.Connected || !strings.Contains(fmt.Sprint(st.LastErr), "no database configured") {
		t.Errorf("status: have %+v", st)
	}
}

func TestCloseEndsProcesses(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	m, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{"a": stdio(), "b": stdio("-tools", "pid")}}, Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, name := range []string{"a_pid", "b_pid"} {
		pid, err := strconv.Atoi(mustCall(t, m, name, `{}`))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	tl := find(m, "a_pid")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d after Close: kill 0 gave %v", pid, err)
		}
	}
	if len(m.Tools()) != 0 {
		t.Errorf("tools after Close: %v", names(m))
	}
	if _, err := tl.Call(context.Background(), tools.Call{}); !errors.Is(err, tools.ErrUnavailable) {
		t.Errorf("a call after Close: have %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// httpServer serves the test server's tools over streamable HTTP,
// requiring a bearer token, and can be taken down and brought back.
type httpServer struct {
	*httptest.Server
	down atomic.Bool
}

func newHTTPServer(t testing.TB, token string) *httpServer {
	mcpServer := testserver.New(testserver.Options{Tools: []string{"echo", "add", "slow"}})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcpServer }, nil)
	hs := &httpServer{}
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hs.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestHTTPServer(t *testing.T) {
	hs := newHTTPServer(t, "tok")
	t.Setenv("VOXPIPE_MCP_TEST_TOKEN", "tok")
	cfg, err := Parse([]byte(`{"mcpServers": {"web": {"url": "` + hs.URL + `", "headers": {"Authorization": "Bearer ${VOXPIPE_MCP_TEST_TOKEN}"}},
		"local": {"command": "` + testServerBin + `", "args": ["-tools", "echo"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := start(t, cfg, Options{PingInterval: 50 * time.Millisecond, PingTimeout: 2 * time.Second, CallTimeout: 5 * time.Second})
	if got, want := names(m), []string{"add", "local_echo", "slow", "web_echo"}; !slices.Equal(got, want) {
		t.Fatalf("tools: have %v, want %v", got, want)
	}
	if got := mustCall(t, m, "web_echo", `{"text":"over http"}`); got != "over http" {
		t.Errorf("web_echo: have %q", got)
	}
	add := find(m, "add")

	hs.down.Store(true)
	eventually(t, "the HTTP server's tools to leave", func() bool { return find(m, "add") == nil })
	if got := names(m); !slices.Equal(got, []string{"local_echo"}) {
		t.Errorf("tools while down: have %v (names stay as they were)", got)
	}
	if _, err := add.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"a":1,"b":1}`)}); !errors.Is(err, tools.ErrUnavailable) {
		t.Errorf("a call while down: have %v", err)
	}

	hs.down.Store(false)
	eventually(t, "the HTTP server's tools to come back", func() bool { return find(m, "add") != nil })
	if got, err := add.Call(context.Background(), tools.Call{Arguments: json.RawMessage(`{"a":1,"b":1}`)}); err != nil || got != "2" {
		t.Errorf("add after the server came back: have %q, %v", got, err)
	}
}

func TestHTTPBadToken(t *testing.T) {
	hs := newHTTPServer(t, "right")
	m := start(t, Config{Servers: map[string]ServerConfig{
		"web": {Type: "http", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer wrong"}},
	}}, Options{})
	if len(m.Tools()) != 0 {
		t.Errorf("tools with a bad token: %v", names(m))
	}
	st := m.Status()[0]
	if st.Connected || st.LastErr == nil {
		t.Errorf("status: %+v", st)
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{min: 250 * time.Millisecond, max: 2 * time.Second, healthy: time.Minute}
	var got []time.Duration
	for range 6 {
		got = append(got, b.after(0))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("failing server: have %v, want %v", got, want)
	}
	if d := b.after(59 * time.Second); d != 2*time.Second {
		t.Errorf("after a short session: have %v", d)
	}
	if d := b.after(time.Minute); d != 250*time.Millisecond {
		t.Errorf("after a healthy minute: have %v, want the minimum again", d)
	}
	if d := b.after(0); d != 500*time.Millisecond {
		t.Errorf("next: have %v", d)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	hs := newHTTPServer(t, "tok")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	m, err := Start(context.Background(), Config{Servers: map[string]ServerConfig{
		"local": stdio("-tools", "echo,crash"),
		"web":   {Type: "http", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer tok"}},
	}}, Options{MinBackoff: 10 * time.Millisecond}, log)
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, m, "web_echo", `{"text":"x"}`)
	_, _ = call(t, m, "crash", `{}`)
	eventually(t, "the restart", func() bool { return m.Status()[0].Restarts >= 1 && m.Status()[0].Connected })
	mustCall(t, m, "local_echo", `{"text":"x"}`)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
