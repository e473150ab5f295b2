package web

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
)

// AdmissionConfig refuses a new voice session (HTTP 503 busy) when the
// server could not serve it in time, rather than admitting it and serving
// everyone badly. The zero value admits up to MaxSessions.
type AdmissionConfig struct {
	// Auto derives the session limit from measured cost: sessions may use
	// Cores × TargetUtilization of CPU, less what the server uses idle,
	// each costing the highest per-session CPU measured recently
	// (SessionCPU until a measurement exists). MaxSessions stays the
	// ceiling.
	Auto              bool
	Cores             float64 // 0: runtime.NumCPU()
	TargetUtilization float64 // 0: 0.8
	SessionCPU        float64 // cores per session before one is measured; 0: 0.25
	// MaxV2V refuses while the p95 server voice-to-voice of the turns that
	// ended in the last 30 s is above it (0: off).
	MaxV2V time.Duration
	// MaxCPUWait refuses while the server's threads spent more than this
	// share of the last second waiting for a CPU (schedstat run delay per
	// core; 0: off). On a shared machine this is the signal that the
	// sessions already admitted are being starved.
	MaxCPUWait float64
}

// Session refusal reasons besides full and shutting_down.
const (
	reasonCapacity = "capacity"   // max_sessions: auto and the measured cost says no
	reasonSlow     = "overloaded" // recent answers too slow, or the CPU is saturated
)

const (
	defaultTargetUtil = 0.8
	defaultSessionCPU = 0.25
	// autoCeiling bounds an auto limit (and is MaxSessions with "auto").
	autoCeiling   = 64
	v2vWindow     = 30 * time.Second
	sampleEvery   = time.Second
	costHalfLife  = 60.0 // seconds for the measured peak session cost to halve its excess
	minCostSample = 0.02 // cores; below it a sample says nothing (idle sessions)
)

// admission holds the measurements admission decides on. Its sampler runs
// once a second while the server does.
type admission struct {
	cfg    AdmissionConfig
	active func() int
	log    zerolog.Logger

	mu       sync.Mutex
	idleCPU  float64 // server CPU with no session, cores (EWMA)
	cost     float64 // decaying peak of CPU per active session, cores; 0 = unmeasured
	limit    int     // current auto limit
	cpuWait  float64 // last second's run delay per core
	v2v      []v2vSample
	lastCPU  time.Duration
	lastWait time.Duration
	lastAt   time.Time
}

type v2vSample struct {
	at time.Time
	ms float64
}

func newAdmission(cfg AdmissionConfig, maxSessions int, active func() int, log zerolog.Logger) *admission {
	if cfg.Cores <= 0 {
		cfg.Cores = float64(runtime.NumCPU())
	}
	if cfg.TargetUtilization <= 0 {
		cfg.TargetUtilization = defaultTargetUtil
	}
	if cfg.SessionCPU <= 0 {
		cfg.SessionCPU = defaultSessionCPU
	}
	a := &admission{cfg: cfg, active: active, log: log, limit: maxSessions}
	a.limit = a.autoLimit(maxSessions)
	return a
}

// run samples until ctx ends.
func (a *admission) run(ctx context.Context, maxSessions int) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	a.sample(maxSessions)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.sample(maxSessions)
		}
	}
}

// sample takes one measurement of process CPU, run delay and sessions.
func (a *admission) sample(maxSessions int) {
	now, cpu, wait := time.Now(), processCPU(), runDelay()
	n := a.active()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.lastAt.IsZero() {
		wall := now.Sub(a.lastAt).Seconds()
		rate := (cpu - a.lastCPU).Seconds() / wall
		a.cpuWait = (wait - a.lastWait).Seconds() / wall / a.cfg.Cores
		if n == 0 {
			a.idleCPU += 0.2 * (rate - a.idleCPU)
		} else if per := (rate - a.idleCPU) / float64(n); per > minCostSample {
			decay := math.Exp2(-wall / costHalfLife)
			a.cost = max(per, a.cost*decay)
		}
		old := a.limit
		a.limit = a.autoLimit(maxSessions)
		if a.cfg.Auto && a.limit != old {
			a.log.Info().Int("max_sessions", a.limit).Float64("session_cpu", round3(a.sessionCost())).
				Float64("idle_cpu", round3(a.idleCPU)).Float64("cpu_wait", round3(a.cpuWait)).Msg("admission: session limit changed")
		}
	}
	a.lastAt, a.lastCPU, a.lastWait = now, cpu, wait
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func (a *admission) sessionCost() float64 {
	if a.cost > 0 {
		return a.cost
	}
	return a.cfg.SessionCPU
}

// autoLimit is the session limit the measurements allow (mu held).
func (a *admission) autoLimit(maxSessions int) int {
	if !a.cfg.Auto {
		return maxSessions
	}
	budget := a.cfg.Cores*a.cfg.TargetUtilization - a.idleCPU
	n := int(budget / a.sessionCost())
	return min(max(n, 1), maxSessions)
}

// refuse says why a new session must be refused now ("" admits it);
// running is how many sessions hold a slot already.
func (a *admission) refuse(running int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Auto && running >= a.limit {
		return reasonCapacity
	}
	if running > 0 && a.cfg.MaxCPUWait > 0 && a.cpuWait > a.cfg.MaxCPUWait {
		return reasonSlow
	}
	if running > 0 && a.cfg.MaxV2V > 0 && a.recentV2VP95() > float64(a.cfg.MaxV2V.Milliseconds()) {
		return reasonSlow
	}
	return ""
}

// recentV2VP95 is the p95 of the window's turns (mu held); 0 with fewer
// than 3 turns, too few to refuse anyone on.
func (a *admission) recentV2VP95() float64 {
	cut := time.Now().Add(-v2vWindow)
	i := 0
	for i < len(a.v2v) && a.v2v[i].at.Before(cut) {
		i++
	}
	a.v2v = a.v2v[i:]
	if len(a.v2v) < 3 {
		return 0
	}
	ms := make([]float64, len(a.v2v))
	for j, s := range a.v2v {
		ms[j] = s.ms
	}
	slices.Sort(ms)
	return ms[int(math.Ceil(0.95*float64(len(ms))))-1]
}

// TurnTraced feeds the latency guard (Metrics passes every turn on).
func (a *admission) TurnTraced(_ string, tr pipeline.Trace) {
	ms, ok := tr.VoiceToVoice()
	if !ok || a.cfg.MaxV2V <= 0 {
		return
	}
	a.mu.Lock()
	a.v2v = append(a.v2v, v2vSample{at: time.Now(), ms: ms})
	if len(a.v2v) > 256 {
		a.v2v = a.v2v[len(a.v2v)-256:]
	}
	a.mu.Unlock()
}

// planCost is the per-session CPU admission plans with.
func (a *admission) planCost() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessionCost()
}

// wait is the last sampled CPU wait per core.
func (a *admission) wait() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cpuWait
}

// Limit is the session limit admission applies now.
func (a *admission) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runDelay sums the time this process's threads spent runnable but waiting
// for a CPU (the second field of /proc/self/task/*/schedstat); 0 where
// schedstat is unavailable. Threads that exited drop out of the sum, so a
// negative difference is possible and reads as no wait.
func runDelay() time.Duration {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var total int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			continue
		}
		if ns, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			total += ns
		}
	}
	return time.Duration(total)
}

// startAdmission sets up s.adm; its sampler (needed by the auto limit and
// the CPU-wait guard only) stops with the server's base context.
func (s *Server) startAdmission(log zerolog.Logger) {
	s.adm = newAdmission(s.cfg.Admission, s.cfg.MaxSessions, s.ActiveSessions, log)
	s.metrics.AddTurnTracer(s.adm)
	s.metrics.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_admission_session_limit",
			Help: "Sessions admission allows now (max_sessions, or the auto limit)."}, func() float64 { return float64(s.adm.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_admission_session_cpu_cores",
			Help: "CPU cost of a session admission plans with (measured peak, or server.admission.session_cpu)."}, func() float64 { return s.adm.planCost() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_admission_cpu_wait_ratio",
			Help: "Share of the last second the server's threads waited for a CPU, per core (schedstat; sampled only with max_sessions auto or max_cpu_wait)."}, func() float64 { return s.adm.wait() }),
	)
	if s.cfg.Admission.Auto || s.cfg.Admission.MaxCPUWait > 0 {
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			s.adm.run(s.baseCtx, s.cfg.MaxSessions)
		}()
	}
}

// refusalMessage is the error text a refused session gets.
func refusalMessage(reason string, maxSessions int) string {
	switch reason {
	case reasonShuttingDown:
		return "server shutting down"
	case reasonCapacity:
		return "server at capacity: the measured cost of a session leaves no room for another"
	case reasonSlow:
		return "server overloaded: answers are running late, try again shortly"
	}
	return fmt.Sprintf("server full: %d sessions running", maxSessions)
}

// AutoSessionCeiling is the session ceiling to configure with an auto
// limit (server.max_sessions: auto).
const AutoSessionCeiling = autoCeiling
