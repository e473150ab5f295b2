package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// SessionLimit is server.max_sessions: a count, or "auto" (SessionsAuto),
// which derives the limit from the measured cost of a session
// (server.admission).
type SessionLimit int

// SessionsAuto is max_sessions: auto.
const SessionsAuto SessionLimit = -1

// UnmarshalYAML accepts a positive count or the word auto.
func (l *SessionLimit) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.EqualFold(n.Value, "auto") {
		*l = SessionsAuto
		return nil
	}
	var v int
	if err := n.Decode(&v); err != nil || v < 0 {
		return fmt.Errorf("line %d: want a session count or auto (got %q)", n.Line, n.Value)
	}
	*l = SessionLimit(v)
	return nil
}

// MarshalYAML writes auto or the count.
func (l SessionLimit) MarshalYAML() (any, error) {
	if l == SessionsAuto {
		return "auto", nil
	}
	return int(l), nil
}

// Admission decides which new sessions the server refuses (HTTP 503 busy).
type Admission struct {
	// Cores sessions may use with max_sessions: auto; 0 = all of the
	// machine's.
	Cores float64 `yaml:"cores"`
	// TargetUtilization is the share of Cores sessions may use.
	TargetUtilization float64 `yaml:"target_utilization"`
	// SessionCPU is the cost of one session (cores) assumed until one
	// has been measured.
	SessionCPU float64 `yaml:"session_cpu"`
	// MaxV2VMs refuses new sessions while the p95 server voice-to-voice
	// of the last 30 s is above it; 0 = off.
	MaxV2VMs int `yaml:"max_v2v_ms"`
	// MaxCPUWait refuses new sessions while the server's threads waited
	// for a CPU more than this share of the last second; 0 = off.
	MaxCPUWait float64 `yaml:"max_cpu_wait"`
}

// Telemetry exports OpenTelemetry traces: a span per turn, a child per
// stage.
type Telemetry struct {
	// OTLPEndpoint is an OTLP/HTTP collector, e.g. http://127.0.0.1:4318;
	// empty = off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	ServiceName  string `yaml:"service_name"`
}

func (v *validator) capacity() {
	s := v.c.Server
	if s.MaxSessions != SessionsAuto {
		v.intRange("server.max_sessions", int(s.MaxSessions), 1, 100000)
	}
	a := s.Admission
	v.floatRange("server.admission.cores", a.Cores, 0, 4096)
	v.floatRange("server.admission.target_utilization", a.TargetUtilization, 0.05, 1)
	v.floatRange("server.admission.session_cpu", a.SessionCPU, 0.001, 64)
	v.intRange("server.admission.max_v2v_ms", a.MaxV2VMs, 0, 600000)
	v.floatRange("server.admission.max_cpu_wait", a.MaxCPUWait, 0, 64)
	if s.AdminAddr != "" {
		// pprof has no auth: profiles, goroutine stacks and the command
		// line are for the machine's own users only.
		host, _, err := net.SplitHostPort(s.AdminAddr)
		if ip := net.ParseIP(host); err == nil && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			err = errors.New("not loopback")
		}
		if err != nil {
			v.fail("server.admin_addr", "want a loopback host:port, e.g. 127.0.0.1:6060 (pprof has no auth), or empty for off (got %q)", s.AdminAddr)
		}
	}
	t := v.c.Telemetry
	if t.OTLPEndpoint != "" && !strings.HasPrefix(t.OTLPEndpoint, "http://") && !strings.HasPrefix(t.OTLPEndpoint, "https://") {
		v.fail("telemetry.otlp_endpoint", "want an http:// or https:// OTLP/HTTP collector URL, or empty for off (got %q)", t.OTLPEndpoint)
	}
	v.nonEmpty("telemetry.service_name", t.ServiceName)
}

// AdmissionV2V is server.admission.max_v2v_ms as a duration.
func (a Admission) AdmissionV2V() time.Duration { return time.Duration(a.MaxV2VMs) * time.Millisecond }
