package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
)

// voxbench soak: N devices talk to one server for a long time while faults
// are injected, and the server's resources are compared at the start and
// the end (make soak).
//
//	voxbench soak [--server bin/voxpipe | --url ws://HOST/ws] [--sessions 16] [--duration 10m]
//	              [--seed 1] [--set key=value ...] [--server-log F] [--json]
//
// With --server it starts that voxpipe binary on a free loopback port (its
// log goes to --server-log) and stops it at the end with SIGTERM, checking
// that it exits 0. Each device asks the built-in questions one after
// another in real time and, turn by turn, at random: waits for the answer
// (most turns), barges in when the answer starts, drops its TCP connection
// in the middle of a turn and resumes the session 0.2-3 s later (the cut
// turn must be reported), sends malformed frames (odd-length PCM, bad JSON,
// an unknown type) or an oversized message (the server closes; it resumes).
// Device 1 also stalls: it stops reading for 60 s (with a 4 KiB socket
// receive buffer) while it goes on asking.
//
// It reports the server's goroutines, open files and RSS (its /metrics) at
// the start, every 30 s and at the end, error events by code (expected ones
// apart), and whether every completed turn's final transcript and answer
// text reached its client.

type soakOptions struct {
	server, url, serverLog string
	sessions               int
	duration               time.Duration
	seed                   int64
	sets                   listFlag
	json, quiet            bool
	maxFrameBytes          int
}

func parseSoakFlags(args []string, stderr io.Writer) (soakOptions, error) {
	var o soakOptions
	fs := flag.NewFlagSet("voxbench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", "", "a voxpipe binary to start on loopback (else --url)")
	fs.StringVar(&o.url, "url", "", "a running server's /ws URL (its process is not checked then)")
	fs.StringVar(&o.serverLog, "server-log", "", "the started server's log (default: a temporary file)")
	fs.IntVar(&o.sessions, "sessions", 16, "devices")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the devices talk")
	fs.Int64Var(&o.seed, "seed", 1, "random seed of the devices' choices")
	fs.Var(&o.sets, "set", "a --set key=value for the started server; repeatable")
	fs.IntVar(&o.maxFrameBytes, "max-frame-bytes", 65536, "the server's server.max_frame_bytes (the oversized message is one byte more)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errCommandLine, err)
	}
	switch {
	case (o.server == "") == (o.url == ""):
		return o, fmt.Errorf("%w: give --server or --url", errCommandLine)
	case o.sessions < 1 || o.duration <= 0:
		return o, fmt.Errorf("%w: --sessions and --duration must be positive", errCommandLine)
	}
	return o, nil
}

// procSample is the server's resource use, from its /metrics.
type procSample struct {
	At         float64 `json:"at_s"`
	Goroutines float64 `json:"goroutines"`
	OpenFiles  float64 `json:"open_files"`
	RSSMB      float64 `json:"rss_mb"`
	HeapMB     float64 `json:"go_heap_mb"`
	CHeapMB    float64 `json:"c_heap_inuse_mb"` // voxpipe_c_heap_inuse_bytes: the C engines' live memory
	Sessions   float64 `json:"active_sessions"`
	Threads    int     `json:"os_threads,omitempty"` // from /proc, for a server soak started
}

// threads reads a process's OS thread count from /proc (0 when unknown).
func threads(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func sampleProc(ctx context.Context, url string, began time.Time) (procSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return procSample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return procSample{}, err
	}
	defer resp.Body.Close()
	s := procSample{At: round1(time.Since(began).Seconds())}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, _, v, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			s.Goroutines = v
		case "process_open_fds":
			s.OpenFiles = v
		case "process_resident_memory_bytes":
			s.RSSMB = round1(v / (1 << 20))
		case "go_memstats_heap_inuse_bytes":
			s.HeapMB = round1(v / (1 << 20))
		case "voxpipe_c_heap_inuse_bytes":
			s.CHeapMB = round1(v / (1 << 20))
		case "voxpipe_active_sessions":
			s.Sessions = v
		}
	}
	return s, sc.Err()
}

// soakStats is what all devices saw; mu guards it.
type soakStats struct {
	mu                  sync.Mutex
	Turns               int            `json:"turns_completed"`
	Interrupted         int            `json:"turns_interrupted"`
	Incomplete          int            `json:"completed_turns_missing_transcript_or_answer"`
	IncompleteExamples  []string       `json:"incomplete_examples,omitempty"`
	TurnTimeouts        int            `json:"turn_timeouts"`
	Drops               int            `json:"drops"`
	Resumed             int            `json:"resumed"`
	ResumeFailed        int            `json:"resume_failed"`
	CutsExpected        int            `json:"cut_turns_expected"`
	CutsReported        int            `json:"cut_turns_reported"`
	BargeIns            int            `json:"barge_ins"`
	Malformed           int            `json:"malformed_sent"`
	Oversized           int            `json:"oversized_sent"`
	Stalls              int            `json:"stalls"`
	StallClosedByServer int            `json:"stalls_closed_by_server"`
	Connections         int            `json:"connections"`
	ConnErrors          map[string]int `json:"connection_errors"`
	Errors              map[string]int `json:"error_events"`
	Closes              map[string]int `json:"server_closes"`
}

func (s *soakStats) add(f func(*soakStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// soakReport is the whole result.
type soakReport struct {
	Sessions   int          `json:"sessions"`
	DurationS  float64      `json:"duration_s"`
	Load       float64      `json:"load_avg_1m_end"`
	Start      procSample   `json:"start"`
	Timeline   []procSample `json:"timeline"`
	End        procSample   `json:"end"`
	ExitCode   *int         `json:"server_exit_code,omitempty"`
	Stats      *soakStats   `json:"stats"`
	Unexpected []string     `json:"unexpected,omitempty"`
}

func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSoakFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	progress := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, "soak: "+format+"\n", a...)
		}
	}
	qs, err := generateQuestions(ctx, "rms", builtinQuestions)
	if err != nil {
		return err
	}
	var srv *exec.Cmd
	exited := make(chan error, 1)
	if o.server != "" {
		if srv, o.url, err = startServer(ctx, o, progress); err != nil {
			return err
		}
		go func() { exited <- srv.Wait() }()
		defer func() {
			if srv.ProcessState == nil {
				_ = srv.Process.Kill()
			}
		}()
	}
	murl, err := metricsURL(o.url)
	if err != nil {
		return err
	}
	began := time.Now()
	pid := 0
	if srv != nil {
		pid = srv.Process.Pid
	}
	sample := func() (procSample, error) {
		s, err := sampleProc(ctx, murl, began)
		if pid != 0 {
			s.Threads = threads(pid)
		}
		return s, err
	}
	rep := soakReport{Sessions: o.sessions, Stats: &soakStats{ConnErrors: map[string]int{}, Errors: map[string]int{}, Closes: map[string]int{}}}
	if rep.Start, err = sample(); err != nil {
		return fmt.Errorf("server metrics: %w", err)
	}
	progress("start: %+v", rep.Start)

	dctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range o.sessions {
		d := &soakDevice{id: i, o: o, qs: qs, st: rep.Stats, rng: rand.New(rand.NewSource(o.seed*1000 + int64(i)))}
		wg.Go(func() {
			select { // arrive staggered
			case <-time.After(time.Duration(i) * 400 * time.Millisecond):
			case <-dctx.Done():
				return
			}
			d.run(dctx)
		})
	}
	tick := time.NewTicker(30 * time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			if s, err := sample(); err == nil {
				rep.Timeline = append(rep.Timeline, s)
				rep.Stats.mu.Lock()
				turns := rep.Stats.Turns
				rep.Stats.mu.Unlock()
				progress("%+v turns=%d", s, turns)
			}
		}
	}
	tick.Stop()
	rep.DurationS = round1(time.Since(began).Seconds())
	// The end sample once every session is gone (parked ones hold no
	// connection).
	for t := time.Now(); time.Since(t) < 30*time.Second; time.Sleep(500 * time.Millisecond) {
		if s, err := sample(); err == nil {
			rep.End = s
			if s.Sessions == 0 {
				break
			}
		}
	}
	rep.Load = loadAvg()
	progress("end: %+v", rep.End)
	if srv != nil {
		_ = srv.Process.Signal(syscall.SIGTERM)
		code := -1
		select {
		case err := <-exited:
			code = 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
		}
		rep.ExitCode = &code
	}
	rep.Unexpected = judge(rep)
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeSoak(stdout, rep)
	return nil
}

// expectedCodes are the error events the injected faults cause.
var expectedCodes = map[string]bool{
	pipeline.CodeBadAudio: true, pipeline.CodeBadMessage: true, pipeline.CodeUnknownType: true,
	pipeline.CodeTooLarge: true, pipeline.CodeTurnCut: true,
}

// judge lists what a soak run should not show.
func judge(r soakReport) []string {
	var bad []string
	st := r.Stats
	if st.Incomplete > 0 {
		bad = append(bad, fmt.Sprintf("%d completed turns lacked their transcript or answer", st.Incomplete))
	}
	for code, n := range st.Errors {
		if !expectedCodes[code] {
			bad = append(bad, fmt.Sprintf("%d error events %s", n, code))
		}
	}
	if st.CutsReported < st.CutsExpected {
		bad = append(bad, fmt.Sprintf("%d of %d cut turns not reported on resume", st.CutsExpected-st.CutsReported, st.CutsExpected))
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		bad = append(bad, fmt.Sprintf("server exit code %d", *r.ExitCode))
	}
	if r.End.Sessions != 0 {
		bad = append(bad, fmt.Sprintf("%v sessions still active at the end", r.End.Sessions))
	}
	if d := r.End.Goroutines - r.Start.Goroutines; d > 20 {
		bad = append(bad, fmt.Sprintf("%.0f more goroutines at the end than at the start", d))
	}
	if d := r.End.OpenFiles - r.Start.OpenFiles; d > 10 {
		bad = append(bad, fmt.Sprintf("%.0f more open files at the end than at the start", d))
	}
	sort.Strings(bad)
	return bad
}

func writeSoak(w io.Writer, r soakReport) {
	st := r.Stats
	fmt.Fprintf(w, "soak: %d devices for %.0f s (load %.1f at the end)\n", r.Sessions, r.DurationS, r.Load)
	fmt.Fprintf(w, "%-8s %10s %10s %8s %10s %9s %8s %8s\n", "", "goroutines", "open files", "RSS MB", "Go heap MB", "C heap MB", "sessions", "threads")
	row := func(name string, s procSample) {
		fmt.Fprintf(w, "%-8s %10.0f %10.0f %8.1f %10.1f %9.1f %8.0f %8d\n", name, s.Goroutines, s.OpenFiles, s.RSSMB, s.HeapMB, s.CHeapMB, s.Sessions, s.Threads)
	}
	row("start", r.Start)
	for _, s := range r.Timeline {
		row(fmt.Sprintf("%.0fs", s.At), s)
	}
	row("end", r.End)
	fmt.Fprintf(w, "turns completed %d (interrupted %d, timed out %d); completed turns missing transcript or answer: %d\n",
		st.Turns, st.Interrupted, st.TurnTimeouts, st.Incomplete)
	fmt.Fprintf(w, "connections %d; drops %d, resumed %d, resume_failed %d; cut turns reported %d of %d\n",
		st.Connections, st.Drops, st.Resumed, st.ResumeFailed, st.CutsReported, st.CutsExpected)
	fmt.Fprintf(w, "barge-ins %d, malformed bursts %d, oversized %d, stalls %d (closed by the server: %d)\n",
		st.BargeIns, st.Malformed, st.Oversized, st.Stalls, st.StallClosedByServer)
	fmt.Fprintf(w, "error events by code: %v\nserver closes: %v\nconnection errors: %v\n", st.Errors, st.Closes, st.ConnErrors)
	for _, ex := range st.IncompleteExamples {
		fmt.Fprintln(w, "  incomplete:", ex)
	}
	if r.ExitCode != nil {
		fmt.Fprintf(w, "server exit code %d\n", *r.ExitCode)
	}
	if len(r.Unexpected) == 0 {
		fmt.Fprintln(w, "nothing unexpected")
	}
	for _, u := range r.Unexpected {
		fmt.Fprintln(w, "UNEXPECTED:", u)
	}
}

// startServer starts o.server on a free loopback port and waits for its
// /healthz.
func startServer(ctx context.Context, o soakOptions, progress func(string, ...any)) (*exec.Cmd, string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logPath := o.serverLog
	if logPath == "" {
		f, err := os.CreateTemp("", "voxpipe-soak-*.log")
		if err != nil {
			return nil, "", err
		}
		logPath = f.Name()
		_ = f.Close()
	}
	logFile, err := os.Create(logPath) //nolint:gosec // the operator's path
	if err != nil {
		return nil, "", err
	}
	args := []string{"serve", "--addr", addr,
		"--set", fmt.Sprintf("server.max_sessions=%d", o.sessions+8),
		"--set", "server.limits.sessions_per_minute=0",
		"--set", fmt.Sprintf("server.max_frame_bytes=%d", o.maxFrameBytes),
		"--set", "log.format=json"}
	for _, s := range o.sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(o.server, args...) //nolint:gosec,noctx // the operator's binary; it is stopped with SIGTERM, not by a context
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, "", err
	}
	_ = logFile.Close() // the child has its own descriptor
	progress("server %s pid %d on %s, log %s", o.server, cmd.Process.Pid, addr, logPath)
	health := "http://" + addr + "/healthz"
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, "ws://" + addr + "/ws", nil
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	_ = cmd.Process.Kill()
	_, _ = cmd.Process.Wait()
	return nil, "", fmt.Errorf("server did not become healthy (log %s)", logPath)
}

// soakDevice is one device of the soak.
type soakDevice struct {
	id  int
	o   soakOptions
	qs  []question
	st  *soakStats
	rng *rand.Rand

	token     string // the session token to resume with
	cutTurn   int    // a turn our drop cut, to be reported on resume
	expectCut int    // the resumed connection must report this turn_cut
	next      int    // the next question
	stalled   bool   // device 1's stall done
}

func (d *soakDevice) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.connection(ctx); err != nil && !errors.Is(err, errDropped) && ctx.Err() == nil {
			d.st.add(func(s *soakStats) { s.ConnErrors[errKind(err)]++ })
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

func errKind(err error) string {
	var re *refusedError
	if errors.As(err, &re) {
		return re.code
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Sprintf("close_%d", ce.Code)
	}
	s := err.Error()
	if i := strings.Index(s, ":"); i > 0 {
		return s[:i]
	}
	return s
}

// soakConn is one connection of a device: a paced microphone and a reader.
type soakConn struct {
	ws     *websocket.Conn
	speech chan []int16 // to the microphone
	raw    chan rawMsg  // malformed messages, sent by the microphone's goroutine
	events chan pipeline.Event
	audio  chan int // answer frames received
	ended  chan error
	pause  chan time.Duration // stall the reader
}

type rawMsg struct {
	typ  int
	data []byte
}

var errDropped = errors.New("dropped on purpose")

// stallDialer dials with a 4 KiB receive buffer: when its client stops
// reading, the server's writes block after a few frames instead of
// filling megabytes of kernel buffer.
var stallDialer = &websocket.Dialer{
	HandshakeTimeout: 10 * time.Second,
	NetDialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) //nolint:gosec // a file descriptor
		})
		if err != nil {
			return err
		}
		return serr
	}}).DialContext,
}

// connection runs one connection: start or resume, then turns until the
// device drops it, the server closes it or ctx ends.
func (d *soakDevice) connection(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	dialer := websocket.DefaultDialer
	if d.id == 1 {
		dialer = stallDialer // its socket buffer is small, so a stall backs up the server
	}
	ws, resp, err := dialer.DialContext(dctx, d.o.url, nil)
	cancel()
	if err != nil {
		return dialRefusal(resp, err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	d.st.add(func(s *soakStats) { s.Connections++ })
	ready, err := d.start(ws)
	if err != nil {
		return err
	}
	d.token = ready.SessionToken

	c := &soakConn{ws: ws, speech: make(chan []int16, 4), raw: make(chan rawMsg, 4),
		events: make(chan pipeline.Event, 4096), audio: make(chan int, 4096), ended: make(chan error, 1), pause: make(chan time.Duration, 1)}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.mic(cctx) })
	wg.Go(func() { c.ended <- c.read() })
	defer func() {
		stop()
		_ = ws.Close()
		wg.Wait()
	}()
	return d.converse(cctx, c)
}

// start sends start (resuming when the device has a token) and returns
// the ready event. The turn_cut reports that follow a resumed ready are
// checked by converse (expectCut).
func (d *soakDevice) start(ws *websocket.Conn) (pipeline.Event, error) {
	msg := map[string]any{"type": "start", "sample_rate": 16000, "encoding": "pcm16", "client": map[string]string{"name": "voxbench-soak", "version": "1"}}
	resuming := d.token != ""
	if resuming {
		msg = map[string]any{"type": "start", "resume": d.token}
	}
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	if err := ws.WriteJSON(msg); err != nil {
		return pipeline.Event{}, err
	}
	var ev pipeline.Event
	if err := ws.ReadJSON(&ev); err != nil {
		return ev, fmt.Errorf("ready: %w", err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	if resuming && ev.Type == pipeline.EventError && ev.Code == pipeline.CodeResumeFailed {
		d.st.add(func(s *soakStats) { s.ResumeFailed++ })
		d.token, d.cutTurn = "", 0
		return d.start(ws)
	}
	if ev.Type != pipeline.EventReady {
		return ev, &refusedError{status: http.StatusSwitchingProtocols, code: ev.Code, msg: ev.Message}
	}
	if resuming {
		d.st.add(func(s *soakStats) {
			s.Resumed++
			if d.cutTurn > 0 {
				s.CutsExpected++
			}
		})
		d.expectCut, d.cutTurn = d.cutTurn, 0
	}
	return ev, nil
}

// mic streams 20 ms frames in real time: queued speech, else silence; it
// also sends the raw messages asked for.
func (c *soakConn) mic(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	silence := make([]byte, 640)
	var pending []int16
	buf := make([]byte, 640)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.raw:
			_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if c.ws.WriteMessage(m.typ, m.data) != nil {
				return
			}
			continue
		case <-tick.C:
		}
		if len(pending) < 320 {
			select {
			case s := <-c.speech:
				pending = append(pending, s...)
			default:
			}
		}
		frame := silence
		if len(pending) >= 320 {
			for i, v := range pending[:320] {
				binary.LittleEndian.PutUint16(buf[2*i:], uint16(v)) //nolint:gosec // the bits of a sample
			}
			frame, pending = buf, pending[320:]
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if c.ws.WriteMessage(websocket.BinaryMessage, frame) != nil {
			return
		}
	}
}

// read is the connection's only reader.
func (c *soakConn) read() error {
	defer close(c.events)
	for {
		select {
		case d := <-c.pause:
			time.Sleep(d) // a stalled client: nothing is read
		default:
		}
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return err
		}
		if typ == websocket.BinaryMessage {
			select {
			case c.audio <- len(data) / 2:
			default:
			}
			continue
		}
		var ev pipeline.Event
		if json.Unmarshal(data, &ev) == nil {
			c.events <- ev
		}
	}
}

// turnLog is what one connection received, per turn.
type soakTurns struct {
	finals  map[int]string
	answers map[int]string
	traced  map[int]bool
}

// converse asks questions until the connection ends.
func (d *soakDevice) converse(ctx context.Context, c *soakConn) error {
	tl := soakTurns{finals: map[int]string{}, answers: map[int]string{}, traced: map[int]bool{}}
	lastFinal := 0
	// handle records one event; it returns the turn of a trace (0: none).
	handle := func(ev pipeline.Event) (traced int) {
		switch ev.Type {
		case pipeline.EventTranscript:
			if ev.Final {
				tl.finals[ev.Turn] += ev.Text
				lastFinal = max(lastFinal, ev.Turn)
			}
		case pipeline.EventAnswer:
			tl.answers[ev.Turn] += ev.Text
		case pipeline.EventError:
			reported := ev.Code == pipeline.CodeTurnCut && d.expectCut > 0 && ev.Turn == d.expectCut
			if reported {
				d.expectCut = 0
			}
			d.st.add(func(s *soakStats) {
				s.Errors[ev.Code]++
				if reported {
					s.CutsReported++
				}
			})
		case pipeline.EventInterrupted:
			// Through the microphone's goroutine: one writer per connection.
			data, _ := json.Marshal(map[string]any{"type": "interrupt", "turn": ev.Turn, "played_ms": 0})
			select {
			case c.raw <- rawMsg{websocket.TextMessage, data}:
			default:
			}
		case pipeline.EventTrace:
			tl.traced[ev.Turn] = true
			d.st.add(func(s *soakStats) {
				if ev.Interrupted {
					s.Interrupted++
					return
				}
				s.Turns++
				if strings.TrimSpace(tl.finals[ev.Turn]) == "" || strings.TrimSpace(tl.answers[ev.Turn]) == "" {
					s.Incomplete++
					if len(s.IncompleteExamples) < 5 {
						s.IncompleteExamples = append(s.IncompleteExamples, fmt.Sprintf("device %d turn %d: transcript %q answer %q", d.id, ev.Turn, tl.finals[ev.Turn], tl.answers[ev.Turn]))
					}
				}
			})
			return ev.Turn
		}
		return 0
	}
	// wait reads events until stop says so, the connection ends (its
	// error), ctx ends or timeout passes (errTurnTimeout).
	errTurnTimeout := errors.New("turn timeout")
	frames := 0 // answer frames since the last question
	wait := func(timeout time.Duration, stop func(ev pipeline.Event, traced int) bool) error {
		t := time.NewTimer(timeout)
		defer t.Stop()
		for {
			select {
			case <-c.audio:
				frames++
				if stop(pipeline.Event{}, 0) {
					return nil
				}
			case ev, ok := <-c.events:
				if !ok {
					err := <-c.ended
					c.ended <- err
					return d.closed(err)
				}
				if stop(ev, handle(ev)) {
					return nil
				}
			case <-t.C:
				return errTurnTimeout
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	say := func() {
		frames = 0
		q := d.qs[d.next%len(d.qs)]
		d.next++
		select {
		case c.speech <- resampled(q, 16000):
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		r := d.rng.Float64()
		switch {
		case d.id == 1 && !d.stalled && d.next >= 2:
			// The stalled reader: it stops reading and goes on asking.
			d.stalled = true
			d.st.add(func(s *soakStats) { s.Stalls++ })
			c.pause <- 60 * time.Second
			for range 4 {
				say()
			}
			err := wait(80*time.Second, func(pipeline.Event, int) bool { return false })
			var ce *websocket.CloseError
			if errors.As(err, &ce) || errors.Is(err, errServerClosed) {
				d.st.add(func(s *soakStats) { s.StallClosedByServer++ })
			}
			if err != nil && !errors.Is(err, errTurnTimeout) {
				return err
			}
		case r < 0.10: // drop mid-turn, then resume
			say()
			before := lastFinal
			if err := wait(60*time.Second, func(ev pipeline.Event, _ int) bool {
				return ev.Type == pipeline.EventTranscript && ev.Final && ev.Turn > before
			}); err != nil {
				return d.turnEnd(err, errTurnTimeout)
			}
			time.Sleep(time.Duration(d.rng.Intn(1500)) * time.Millisecond)
			// Whatever arrived before the cut counts.
			for drained := false; !drained; {
				select {
				case ev, ok := <-c.events:
					if !ok {
						drained = true
						break
					}
					handle(ev)
				default:
					drained = true
				}
			}
			if !tl.traced[lastFinal] {
				d.cutTurn = lastFinal
			}
			d.st.add(func(s *soakStats) { s.Drops++ })
			_ = c.ws.UnderlyingConn().Close()
			time.Sleep(200*time.Millisecond + time.Duration(d.rng.Intn(2800))*time.Millisecond)
			return errDropped
		case r < 0.20: // barge in when the answer starts
			say()
			before := lastFinal
			if err := wait(60*time.Second, func(pipeline.Event, int) bool {
				return frames > 0 && lastFinal > before
			}); err != nil {
				return d.turnEnd(err, errTurnTimeout)
			}
			time.Sleep(300 * time.Millisecond)
			d.st.add(func(s *soakStats) { s.BargeIns++ })
			say()
			// The barged turn's trace, then the new question's.
			n := 0
			if err := wait(90*time.Second, func(_ pipeline.Event, traced int) bool {
				if traced > 0 {
					n++
				}
				return n == 2
			}); err != nil {
				return d.turnEnd(err, errTurnTimeout)
			}
		case r < 0.25: // malformed frames
			d.st.add(func(s *soakStats) { s.Malformed++ })
			for _, m := range []rawMsg{{websocket.BinaryMessage, []byte{1, 2, 3}}, {websocket.TextMessage, []byte("{not json")},
				{websocket.TextMessage, []byte(`{"type":"sing"}`)}} {
				select {
				case c.raw <- m:
				case <-ctx.Done():
					return nil
				}
			}
			seen := 0
			if err := wait(20*time.Second, func(ev pipeline.Event, _ int) bool {
				if ev.Type == pipeline.EventError && (ev.Code == pipeline.CodeBadAudio || ev.Code == pipeline.CodeBadMessage || ev.Code == pipeline.CodeUnknownType) {
					seen++
				}
				return seen == 3
			}); err != nil {
				return d.turnEnd(err, errTurnTimeout)
			}
		case r < 0.26: // a message over the size limit: the server closes
			d.st.add(func(s *soakStats) { s.Oversized++ })
			select {
			case c.raw <- rawMsg{websocket.BinaryMessage, make([]byte, d.o.maxFrameBytes+2)}:
			case <-ctx.Done():
				return nil
			}
			err := wait(20*time.Second, func(pipeline.Event, int) bool { return false })
			return d.turnEnd(err, errTurnTimeout)
		default: // ask and wait for the answer
			say()
			if err := wait(90*time.Second, func(_ pipeline.Event, traced int) bool { return traced > 0 }); err != nil {
				return d.turnEnd(err, errTurnTimeout)
			}
			time.Sleep(time.Duration(300+d.rng.Intn(700)) * time.Millisecond)
		}
	}
	return nil
}

// errServerClosed: the server closed the connection.
var errServerClosed = errors.New("server closed")

// closed records how the server ended the connection.
func (d *soakDevice) closed(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		d.st.add(func(s *soakStats) { s.Closes[fmt.Sprint(ce.Code)]++ })
		return errServerClosed
	}
	return err
}

// turnEnd turns a wait's error into the connection's end: a timeout is
// counted and the connection dropped (resumed next), a server close is
// already counted.
func (d *soakDevice) turnEnd(err, timeout error) error {
	switch {
	case errors.Is(err, timeout):
		d.st.add(func(s *soakStats) { s.TurnTimeouts++ })
		return nil // the next connection resumes
	case errors.Is(err, errServerClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return err
}
