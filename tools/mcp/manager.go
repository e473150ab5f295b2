package mcp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/tools"
)

// Options are the limits and policies of a Manager. The zero value is
// usable: every field has a default.
type Options struct {
	// Allow is a per-server allow-list of the tools' own names (as the
	// server lists them, not as the model sees them). A server absent from
	// the map offers all its tools; a server mapped to an empty list
	// offers none. A name in Allow that is no server of the config is an
	// error of Start.
	Allow map[string][]string
	// CallTimeout bounds one tools/call (the turn's own deadline still
	// applies); default 30 s.
	CallTimeout time.Duration
	// MaxOutputBytes bounds the text a call returns; a longer result is
	// cut, at a UTF-8 boundary, and ends with a "[truncated …]" marker.
	// Default 16 KiB.
	MaxOutputBytes int
	// MinBackoff and MaxBackoff bound the wait before a restart: it starts
	// at MinBackoff, doubles after each failure up to MaxBackoff, and is
	// back at MinBackoff once a server has stayed up for HealthyAfter.
	// Defaults 250 ms, 30 s, 1 min.
	MinBackoff, MaxBackoff time.Duration
	HealthyAfter           time.Duration
	// ConnectTimeout bounds starting a server: the process start or first
	// request, initialize and the whole tools/list. Default 30 s (npx may
	// fetch a package first).
	ConnectTimeout time.Duration
	// PingInterval is how often a connected server is pinged; one that
	// does not answer within PingTimeout is restarted. This is how an
	// HTTP server that went away is noticed between calls. Default 30 s,
	// 10 s.
	PingInterval, PingTimeout time.Duration
	// StopTimeout is how long a command has to exit once its stdin is
	// closed, and again after SIGTERM, before it is killed. Default 2 s.
	StopTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultCallTimeout    = 30 * time.Second
	DefaultMaxOutputBytes = 16 << 10
	DefaultMinBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultHealthyAfter   = time.Minute
	DefaultConnectTimeout = 30 * time.Second
	DefaultPingInterval   = 30 * time.Second
	DefaultPingTimeout    = 10 * time.Second
	DefaultStopTimeout    = 2 * time.Second
)

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.CallTimeout, DefaultCallTimeout)
	def(&o.MinBackoff, DefaultMinBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.HealthyAfter, DefaultHealthyAfter)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.PingInterval, DefaultPingInterval)
	def(&o.PingTimeout, DefaultPingTimeout)
	def(&o.StopTimeout, DefaultStopTimeout)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return o
}

// Manager runs the MCP servers of a Config and offers their tools. It is a
// tools.Provider; Tools never blocks. Close stops every server.
//
// Each server has one supervising goroutine, which owns its connection:
// it connects, lists the tools, waits for the session to end (the process
// died, the endpoint stopped answering pings) and reconnects with
// back-off, for as long as the Manager runs.
type Manager struct {
	log     zerolog.Logger
	opts    Options
	servers []*server // sorted by name

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	// mu serialises rebuilds of tools (which read every server's state);
	// readers take the snapshot without it.
	mu    sync.Mutex
	tools atomic.Pointer[[]tools.Tool]
}

var _ tools.Provider = (*Manager)(nil)

// Start checks cfg and opts, starts every enabled server in the
// background and returns once each has connected or failed its first try,
// or ctx is done, whichever comes first; servers not up by then keep
// trying (and are logged). ctx bounds only that wait: the servers run
// until Close.
//
// A config that cannot work is an error before anything starts: an
// allow-list for a server the config does not have, or a command that is
// not found.
func Start(ctx context.Context, cfg Config, opts Options, log zerolog.Logger) (*Manager, error) {
	opts = opts.withDefaults()
	for name := range opts.Allow {
		if _, ok := cfg.Servers[name]; !ok {
			return nil, fmt.Errorf("mcp: allow-list names server %q, which the MCP config does not have", name)
		}
	}
	m := &Manager{log: log.With().Str("component", "mcp").Logger(), opts: opts}
	for _, name := range cfg.enabled() {
		sc := cfg.Servers[name]
		if sc.Type == "stdio" {
			if _, err := exec.LookPath(sc.Command); err != nil {
				return nil, fmt.Errorf("mcp: server %q: command %q: %w", name, sc.Command, err)
			}
		}
		var allow map[string]bool
		if list, ok := opts.Allow[name]; ok {
			allow = make(map[string]bool, len(list))
			for _, t := range list {
				allow[t] = true
			}
		}
		m.servers = append(m.servers, newServer(m, name, sc, allow))
	}
	empty := []tools.Tool{}
	m.tools.Store(&empty)

	// The servers outlive ctx (it bounds only the first wait); they end
	// with Close.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	for _, s := range m.servers {
		m.wg.Go(func() { s.run(runCtx) })
	}
	for _, s := range m.servers {
		select {
		case <-s.firstTry:
		case <-ctx.Done():
		}
	}
	for _, s := range m.servers {
		if !s.connected() {
			m.log.Warn().Str("server", s.name).Msg("mcp server not up yet; its tools join once it is")
		}
	}
	return m, nil
}

// Tools returns the tools of every connected server, under the names the
// model sees (see the package doc). It never blocks on a server.
func (m *Manager) Tools() []tools.Tool {
	if m == nil {
		return nil
	}
	return slices.Clone(*m.tools.Load())
}

// Close stops every server (commands get StopTimeout to exit after their
// stdin closes, then SIGTERM, then SIGKILL) and waits for the supervising
// goroutines to end. It is idempotent and always returns nil.
func (m *Manager) Close() error {
	if m == nil {
		return nil
	}
	m.closeOnce.Do(func() {
		m.cancel()
		m.wg.Wait()
		empty := []tools.Tool{}
		m.tools.Store(&empty)
	})
	return nil
}

// ServerStatus is one server as Status reports it.
type ServerStatus struct {
	Name      string
	Connected bool
	Tools     int   // tools offered now (after the allow-list)
	Restarts  int   // sessions started after the first
	LastErr   error // why the last session ended or the last try failed; nil if none has
}

// Status reports every enabled server, sorted by name.
func (m *Manager) Status() []ServerStatus {
	if m == nil {
		return nil
	}
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// rebuild recomputes the snapshot after a server's tools changed.
//
// Names are decided over the last-known tools of every server, connected
// or not, so that a server's restart does not rename another server's
// tools under the model; only connected servers' tools are offered.
func (m *Manager) rebuild() {
	m.mu.Lock()
	defer m.mu.Unlock()

	type item struct {
		s    *server
		real string
		base string
	}
	var all []item
	owners := map[string]map[*server]bool{}
	for _, s := range m.servers {
		for _, t := range s.knownTools() {
			base := sanitize(t.Name)
			all = append(all, item{s: s, real: t.Name, base: base})
			if owners[base] == nil {
				owners[base] = map[*server]bool{}
			}
			owners[base][s] = true
		}
	}
	taken := map[string]bool{}
	names := make([]string, len(all))
	for i, it := range all {
		name := it.base
		if len(owners[it.base]) > 1 {
			name = sanitize(sanitize(it.s.name) + "_" + it.base)
		}
		names[i] = unique(name, taken)
	}
	snap := []tools.Tool{}
	for _, s := range m.servers {
		live := s.liveTools()
		if live == nil {
			continue
		}
		for i, it := range all {
			if it.s != s {
				continue
			}
			if t, ok := live[it.real]; ok {
				snap = append(snap, newTool(s, t, names[i]))
			}
		}
	}
	sort.SliceStable(snap, func(i, j int) bool { return snap[i].Spec().Name < snap[j].Spec().Name })
	m.tools.Store(&snap)
}

// Errors of the package.
var (
	// errSessionEnded: the server closed the session (process exit, HTTP
	// session gone).
	errSessionEnded = errors.New("session ended")
)
