package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// maxPages bounds tools/list paging: a server whose cursors never end is
// broken, and listing it must not loop for ever.
const maxPages = 100

// server is one configured MCP server and its supervising goroutine (run).
type server struct {
	m     *Manager
	name  string
	cfg   ServerConfig
	allow map[string]bool // nil: every tool
	log   zerolog.Logger

	firstTry chan struct{} // closed (by tried) once the first try connected or failed
	tryOnce  sync.Once
	// refresh asks run to list the tools again (notifications/tools/list_changed);
	// check asks it to ping now (a call saw the transport fail). Both hold
	// at most one pending request and are never closed: senders never block.
	refresh chan struct{}
	check   chan struct{}

	// mu guards the fields below.
	mu       sync.Mutex
	sess     *sdk.ClientSession // nil while down
	live     map[string]*sdk.Tool
	known    []*sdk.Tool // the last list, kept while down (names stay stable)
	restarts int
	lastErr  error
}

func newServer(m *Manager, name string, cfg ServerConfig, allow map[string]bool) *server {
	return &server{
		m: m, name: name, cfg: cfg, allow: allow,
		log:      m.log.With().Str("server", name).Logger(),
		firstTry: make(chan struct{}),
		refresh:  make(chan struct{}, 1),
		check:    make(chan struct{}, 1),
	}
}

func (s *server) tried() { s.tryOnce.Do(func() { close(s.firstTry) }) }

func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// backoff is the wait before a restart: min, doubling to max, back to min
// after a session that stayed up for healthy.
type backoff struct {
	min, max, healthy time.Duration
	next              time.Duration
}

// after returns the wait after a session that was up for up (0: it never
// came up).
func (b *backoff) after(up time.Duration) time.Duration {
	if b.next == 0 || up >= b.healthy {
		b.next = b.min
	}
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// run connects, serves and reconnects until ctx is done.
func (s *server) run(ctx context.Context) {
	b := backoff{min: s.m.opts.MinBackoff, max: s.m.opts.MaxBackoff, healthy: s.m.opts.HealthyAfter}
	defer s.tried()
	for first := true; ; first = false {
		upSince, err := s.session(ctx, first)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.lastErr = err
		n := s.restarts + 1
		s.mu.Unlock()
		s.tried()
		var up time.Duration
		if !upSince.IsZero() {
			up = time.Since(upSince)
		}
		delay := b.after(up)
		s.log.Warn().Err(err).Dur("retry_in", delay).Int("restart", n).Msg("mcp server down; restarting")
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.mu.Lock()
		s.restarts = n
		s.mu.Unlock()
	}
}

// session runs one connection: connect, list, then serve until it ends.
// upSince is when the tools were published (zero if that never happened).
func (s *server) session(ctx context.Context, first bool) (upSince time.Time, err error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "voxpipe", Version: "1"}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: voxpipe only calls tools.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			nudge(s.refresh)
		},
	})
	transport, proc, err := s.transport()
	if err != nil {
		return time.Time{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		proc.cleanup()
		return time.Time{}, fmt.Errorf("connect: %w%s", err, proc.stderrTail())
	}
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	defer func() {
		s.setDown()
		_ = cs.Close()
		if werr := <-ended; werr != nil {
			s.log.Debug().Err(werr).Msg("mcp session closed")
		}
		proc.cleanup()
		if err != nil && ctx.Err() == nil {
			// The command has exited and its stderr is all read: its last
			// lines usually say why it ended.
			err = fmt.Errorf("%w%s", err, proc.stderrTail())
		}
	}()

	list, err := s.list(cctx, cs)
	if err != nil {
		return time.Time{}, fmt.Errorf("tools/list: %w", err)
	}
	cancel()
	s.setUp(cs, list)
	s.tried()
	upSince = time.Now()
	ev := s.log.Info().Int("tools", len(list))
	if !first {
		ev = ev.Bool("restarted", true)
	}
	ev.Msg("mcp server connected")

	ping := time.NewTicker(s.m.opts.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return upSince, ctx.Err()
		case err := <-ended:
			ended <- err // for the deferred wait
			if err == nil {
				err = errSessionEnded
			}
			return upSince, err
		case <-s.refresh:
			lctx, lcancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
			list, err := s.list(lctx, cs)
			lcancel()
			if err != nil {
				if answered(err) == nil {
					return upSince, fmt.Errorf("tools/list after list_changed: %w", err)
				}
				// The server is there but would not list: keep the tools it had.
				s.log.Warn().Err(err).Msg("mcp server's tools/list failed after list_changed; keeping the old list")
				continue
			}
			s.setUp(cs, list)
			s.log.Info().Int("tools", len(list)).Msg("mcp server's tools changed")
		case <-s.check:
			if err := s.ping(ctx, cs); err != nil {
				return upSince, err
			}
		case <-ping.C:
			if err := s.ping(ctx, cs); err != nil {
				return upSince, err
			}
		}
	}
}

func (s *server) ping(ctx context.Context, cs *sdk.ClientSession) error {
	pctx, cancel := context.WithTimeout(ctx, s.m.opts.PingTimeout)
	defer cancel()
	err := cs.Ping(pctx, nil)
	if err == nil || answered(err) != nil {
		// An error answer (a server without ping) still proves it is there.
		return nil
	}
	return fmt.Errorf("ping: %w", err)
}

// list fetches every page of tools/list and applies the allow-list.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	seen := map[string]bool{}
	params := &sdk.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("more than %d pages", maxPages)
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			if t == nil || t.Name == "" {
				continue
			}
			if s.allow != nil && !s.allow[t.Name] {
				continue
			}
			out = append(out, t)
		}
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("cursor %q came back twice", res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	if s.allow != nil {
		have := map[string]bool{}
		for _, t := range out {
			have[t.Name] = true
		}
		var missing []string
		for name := range s.allow {
			if !have[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			s.log.Warn().Strs("tools", missing).Msg("allow-list names tools the mcp server does not offer")
		}
	}
	return out, nil
}

func (s *server) setUp(cs *sdk.ClientSession, list []*sdk.Tool) {
	live := make(map[string]*sdk.Tool, len(list))
	for _, t := range list {
		live[t.Name] = t
	}
	s.mu.Lock()
	s.sess, s.live, s.known = cs, live, list
	s.mu.Unlock()
	s.m.rebuild()
}

func (s *server) setDown() {
	s.mu.Lock()
	s.sess, s.live = nil, nil
	s.mu.Unlock()
	s.m.rebuild()
}

func (s *server) current() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *server) connected() bool { return s.current() != nil }

func (s *server) knownTools() []*sdk.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known
}

// liveTools is nil while the server is down.
func (s *server) liveTools() map[string]*sdk.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ServerStatus{Name: s.name, Connected: s.sess != nil, Tools: len(s.live), Restarts: s.restarts, LastErr: s.lastErr}
}

// transport builds a fresh transport for one session.
func (s *server) transport() (sdk.Transport, *process, error) {
	if s.cfg.Type == "http" {
		// A transport of its own, so that the session's end closes its
		// idle connections too.
		base := http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Transport: headerTransport{base: base, headers: s.cfg.Headers}}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, &process{http: base}, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...) //nolint:gosec,noctx // the operator's config names the command; its lifetime is the session's, ended by Close
	cmd.Dir = s.cfg.Cwd
	if len(s.cfg.Env) > 0 {
		env := os.Environ()
		keys := make([]string, 0, len(s.cfg.Env))
		for k := range s.cfg.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+s.cfg.Env[k])
		}
		cmd.Env = env
	}
	p := &process{cmd: cmd, stderr: newTailWriter(s.log)}
	cmd.Stderr = p.stderr
	// A grandchild that keeps stderr open must not hold Wait for ever.
	cmd.WaitDelay = s.m.opts.StopTimeout
	ownGroup(cmd)
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: s.m.opts.StopTimeout}, p, nil
}

// process is a stdio server's command, for what the SDK's transport does
// not do: keep its stderr and end the processes it started.
type process struct {
	cmd    *exec.Cmd // nil for HTTP
	stderr *tailWriter
	http   *http.Transport // nil for a command
}

// cleanup closes an HTTP server's idle connections, or ends what is left
// of the command's process group (a server run
// through npx or a shell leaves its real process behind otherwise) and
// reaps the command if the transport did not.
func (p *process) cleanup() {
	if p.http != nil {
		p.http.CloseIdleConnections()
	}
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	killGroup(p.cmd)
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Wait()
	}
}

func (p *process) stderrTail() string {
	if p.stderr == nil {
		return ""
	}
	if t := p.stderr.tail(); t != "" {
		return "; stderr: " + t
	}
	return ""
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) == 0 {
		return h.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// JSON-RPC codes the SDK makes up on the client side for a transport that
// failed (an HTTP error status, a closed pipe): no server sent them.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// answered returns the server's own JSON-RPC error answer in err (it is
// up, it refused), or nil when err is a transport failure.
func answered(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return nil
	}
	switch werr.Code {
	case codeClientClosing, codeServerClosing, codeRejected:
		return nil
	}
	return werr
}

// tailWriter logs a command's stderr line by line (Debug) and keeps the
// last lines for the error that reports its exit.
type tailWriter struct {
	log zerolog.Logger

	mu    sync.Mutex // guards the fields below (os/exec writes from its own goroutine)
	part  []byte
	lines []string
}

const (
	tailLines   = 5
	maxLineSize = 512
)

func newTailWriter(log zerolog.Logger) *tailWriter { return &tailWriter{log: log} }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := strings.IndexByte(string(p), '\n')
		if i < 0 {
			if room := maxLineSize - len(w.part); room > 0 {
				w.part = append(w.part, p[:min(room, len(p))]...)
			}
			break
		}
		if room := maxLineSize - len(w.part); room > 0 {
			w.part = append(w.part, p[:min(room, i)]...)
		}
		w.lineLocked(string(w.part))
		w.part = w.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

// lineLocked records one line; w.mu must be held.
func (w *tailWriter) lineLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	w.log.Debug().Str("stderr", line).Msg("mcp server")
	w.lines = append(w.lines, line)
	if len(w.lines) > tailLines {
		w.lines = w.lines[len(w.lines)-tailLines:]
	}
}

func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	if len(w.part) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(w.part))
	}
	return strings.Join(lines, " | ")
}
