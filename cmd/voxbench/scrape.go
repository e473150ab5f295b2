package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverSample is what voxbench reads from the server's /metrics around a
// level: each counter summed over its series (label filters below).
type serverSample struct {
	ok  bool
	cpu float64 // process_cpu_seconds_total
	// dropped and buffered audio frames, sessions refused as busy
	dropped, buffered, busy float64
}

// httpURL parses the --url given (ws://host/ws, or http://host for rtc
// and xiaozhi) and gives it the matching http or https scheme.
func httpURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "ws", "http":
		u.Scheme = "http"
	case "wss", "https":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("url %q: want ws://, wss://, http:// or https://", raw)
	}
	u.RawQuery = ""
	return u, nil
}

// metricsURL turns the session URL into http://host/metrics.
func metricsURL(raw string) (string, error) {
	u, err := httpURL(raw)
	if err != nil {
		return "", err
	}
	u.Path = "/metrics"
	return u.String(), nil
}

// scrape reads the server's counters; a server without /metrics gives a
// sample with ok false (its figures are then reported as unknown).
func scrape(ctx context.Context, url string) serverSample {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return serverSample{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return serverSample{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return serverSample{}
	}
	s := serverSample{ok: true}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		switch {
		case name == "process_cpu_seconds_total":
			s.cpu += value
		case name == "voxpipe_frames_dropped_total":
			s.dropped += value
		case name == "voxpipe_asr_frames_buffered_total":
			s.buffered += value
		case name == "voxpipe_sessions_rejected_total" && !strings.Contains(labels, `"bad_upgrade"`):
			s.busy += value
		}
	}
	return s
}

// parseSample splits one exposition line: name{labels} value [timestamp].
func parseSample(line string) (name, labels string, value float64, ok bool) {
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		j := strings.LastIndex(rest, "}")
		if j < 0 {
			return "", "", 0, false
		}
		labels, rest = rest[:j+1], rest[j+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, v, err == nil
}

// selfCPU is voxbench's own user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the machine's 1-minute load average (0 when unknown): the
// machine is shared, so every figure is reported beside it.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscan(string(b), &l)
	return l
}
