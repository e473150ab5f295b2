// Command voxbench measures how many conversations a voxpipe server holds
// at a latency SLO. It starts N virtual devices against the server (the
// WebSocket /ws, WebRTC with --transport rtc, or a xiaozhi speaker's
// protocol with --transport xiaozhi), each speaking questions in
// real time for several turns, arriving --stagger apart, and reports for
// every N: heard latency (first audible answer sample received − last
// speech sample sent, what a person hears) and the server's voice-to-voice
// at p50/p95/p99, every trace stage's p50/p95, transcripts that came back
// wrong (WER against the reference text), frames the server dropped, errors
// by code, busy rejections, the server's CPU (process_cpu_seconds_total from
// /metrics) and voxbench's own.
//
//	voxbench [--url ws://127.0.0.1:8080/ws] [--sessions 1,2,4,8 | --ramp]
//	         [--turns 3 | --duration 60s] [--wav F ... | --dir D] [--slo-ms 800]
//	         [--json] [--plot out.svg] [--markdown] [--cpuprofile voxbench.prof] [--procs N]
//	         [--turns-out turns.jsonl]
//	voxbench doc --results r.json [--gobench go-bench.txt] [--out docs/performance.md]
//	voxbench soak [--server bin/voxpipe | --url ws://HOST/ws] [--sessions 16] [--duration 10m] (soak.go)
//
// Without --wav or --dir it speaks a built-in question set with flite (in
// memory, at run time). A file F.wav is scored against F.txt when present.
// A level is within the SLO when every session was admitted and served
// without errors or dropped frames, heard p95 ≤ --slo-ms, and no transcript
// came back worse than the same question's at one session; --json prints
// {"results":[{"sessions":N,"turns":T,"heard_p50_ms",...}],"max_sessions_within_slo":K}.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errCommandLine marks a mistake on the command line (exit status 2).
var errCommandLine = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "voxbench:", err)
		if errors.Is(err, errCommandLine) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// options are the parsed flags.
type options struct {
	url, transport, encoding string
	wavs                     listFlag
	dir, voice               string
	levels                   []int
	ramp                     bool
	turns                    int
	duration                 time.Duration
	stagger, pause, bargeIn  time.Duration
	turnTimeout              time.Duration
	sloMs                    int
	json, markdown, quiet    bool
	sameQuestions            bool
	devices                  bool
	plot                     string
	cpuProfile               string
	turnsOut                 string
	procs                    int
}

// rampLevels are tried in order by --ramp until a level misses the SLO.
var rampLevels = []int{1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("voxbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "ws://127.0.0.1:8080/ws", "server: the /ws URL (ws) or the server's base URL (rtc)")
	fs.StringVar(&o.transport, "transport", "ws", "ws (WebSocket /ws), rtc (WebRTC through /rtc/offer) or xiaozhi (a xiaozhi speaker: OTA, /xiaozhi/v1/, 60 ms Opus; --barge-in listens in realtime mode)")
	fs.StringVar(&o.encoding, "encoding", "pcm16", "ws audio encoding: pcm16 or opus (rtc and xiaozhi are always Opus)")
	fs.Var(&o.wavs, "wav", "a question to speak (WAV; F.txt beside it is its reference text); repeatable")
	fs.StringVar(&o.dir, "dir", "", "a folder of question WAVs (each with an optional .txt reference)")
	fs.StringVar(&o.voice, "voice", "rms", "flite voice of the built-in question set (slt, rms, awb, kal16)")
	sessions := fs.String("sessions", "1,2,4,8", "levels: concurrent sessions, comma-separated")
	fs.BoolVar(&o.ramp, "ramp", false, "levels "+fmt.Sprint(rampLevels)+" until one misses the SLO (instead of --sessions)")
	fs.IntVar(&o.turns, "turns", 3, "questions per session (ignored with --duration)")
	fs.DurationVar(&o.duration, "duration", 0, "run each level this long, sessions asking question after question (0: --turns each)")
	fs.DurationVar(&o.stagger, "stagger", 370*time.Millisecond, "time between session arrivals")
	fs.BoolVar(&o.devices, "devices", false, "session i of every level is device voxbench-i (the start message's device), as a smart speaker that comes back: the server may remember its speaker from an earlier session (pipeline.turn.remember_speakers)")
	fs.BoolVar(&o.sameQuestions, "same-questions", false, "every session asks the questions in the same order (default: session i starts at question i), so the 1-session level has asked each turn's question after the same earlier ones: an exact baseline for \"worse than at 1 session\"")
	fs.DurationVar(&o.pause, "pause", 700*time.Millisecond, "silence after an answer ends before the next question")
	fs.DurationVar(&o.bargeIn, "barge-in", 0, "speak the next question this long after the answer starts, cutting it (0: wait for the answer)")
	fs.DurationVar(&o.turnTimeout, "turn-timeout", 30*time.Second, "give up on a turn after this long without its end")
	fs.IntVar(&o.sloMs, "slo-ms", 800, "latency SLO for heard p95, ms")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON on stdout")
	fs.BoolVar(&o.markdown, "markdown", false, "print the results as the markdown tables of docs/performance.md")
	fs.BoolVar(&o.quiet, "quiet", false, "no live progress on stderr")
	fs.StringVar(&o.plot, "plot", "", "write latency against sessions as an SVG to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write voxbench's own CPU profile (pprof) over the levels to this file")
	fs.StringVar(&o.turnsOut, "turns-out", "", "write every turn (level, session, transcript, heard, trace marks) as a JSON line to this file")
	fs.IntVar(&o.procs, "procs", 0, "voxbench's own Go threads running at once (GOMAXPROCS); 0: 1 with --transport ws --encoding pcm16, Go's default (every core) with Opus or WebRTC, whose codecs take ~0.4 ms a frame")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errCommandLine, fs.Args())
	}
	if !o.ramp {
		for _, f := range strings.Split(*sessions, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1000 {
				return o, fmt.Errorf("%w: --sessions %q: want positive counts like 1,2,4,8", errCommandLine, *sessions)
			}
			o.levels = append(o.levels, n)
		}
	} else {
		o.levels = rampLevels
	}
	switch {
	case o.transport != "ws" && o.transport != "rtc" && o.transport != "xiaozhi":
		return o, fmt.Errorf("%w: --transport %q: want ws, rtc or xiaozhi", errCommandLine, o.transport)
	case o.encoding != "pcm16" && o.encoding != "opus":
		return o, fmt.Errorf("%w: --encoding %q: want pcm16 or opus", errCommandLine, o.encoding)
	case o.turns < 1:
		return o, fmt.Errorf("%w: --turns %d: want >= 1", errCommandLine, o.turns)
	case o.sloMs < 1:
		return o, fmt.Errorf("%w: --slo-ms %d: want >= 1", errCommandLine, o.sloMs)
	case o.duration < 0 || o.stagger < 0 || o.pause < 0 || o.bargeIn < 0 || o.turnTimeout <= 0:
		return o, fmt.Errorf("%w: durations must not be negative", errCommandLine)
	case o.procs < 0:
		return o, fmt.Errorf("%w: --procs %d: want >= 0", errCommandLine, o.procs)
	}
	if o.procs == 0 && o.transport == "ws" && o.encoding == "pcm16" {
		o.procs = 1
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	if len(args) > 0 && args[0] == "soak" {
		return runSoak(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "doc" {
		stop := context.AfterFunc(ctx, func() { os.Exit(130) }) // a file job: Ctrl-C ends it at once
		defer stop()
		return runDoc(args[1:], stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.procs > 0 {
		// One thread for every device: a PCM16 device's work per frame is
		// microseconds, and its wake-ups cost more than the work (the
		// kernel's and the Go runtime's sleep and wake path). With a
		// second P, the runtime hands a woken goroutine to a second
		// thread and wakes it: at 8 sessions a quarter of voxbench's CPU.
		runtime.GOMAXPROCS(o.procs)
	}
	var qs []question
	if len(o.wavs) > 0 || o.dir != "" {
		qs, err = loadQuestions(o.wavs, o.dir)
	} else {
		qs, err = generateQuestions(ctx, o.voice, builtinQuestions)
	}
	if err != nil {
		return err
	}
	dev, err := newDevice(o)
	if err != nil {
		return err
	}
	murl, err := metricsURL(o.url)
	if err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	progress := io.Writer(stderr)
	if o.quiet {
		progress = io.Discard
	}
	b := &bench{o: o, qs: qs, dev: dev, metricsURL: murl, progress: progress}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	if o.turnsOut != "" {
		f, err := os.Create(o.turnsOut)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		b.turnsOut = f
	}
	var levels []levelStats
	for _, n := range o.levels {
		if ctx.Err() != nil {
			break
		}
		levels = append(levels, b.level(ctx, n))
		if r := finish(levels, o.sloMs); o.ramp && !r.Results[len(levels)-1].WithinSLO {
			break
		}
	}
	r := finish(levels, o.sloMs)
	switch {
	case o.json:
		err = writeJSON(stdout, r)
	case o.markdown:
		writeMarkdown(stdout, r)
	default:
		writeTable(stdout, r)
	}
	if err == nil && o.plot != "" {
		err = writePlot(o.plot, r)
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}

// startCPUProfile profiles voxbench itself into path (the levels only: the
// question set is generated before) and returns the function that ends it.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
