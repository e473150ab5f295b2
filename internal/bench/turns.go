package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/internal/questions"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	"github.com/voxpipe/voxpipe/tts"
	ttsespeak "github.com/voxpipe/voxpipe/tts/espeak"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
	"github.com/voxpipe/voxpipe/web"
)

// voxpipe bench turns: what a person hears, and how often a pause ends the
// turn too soon, for the configured end of turn against mode silence in the
// same run. Both servers run in this process on loopback WebSockets with
// shared backends; every utterance is streamed in real time to one and then
// the other (the order alternates), as a device would.
//
// The utterances are made at run time and never written to disk: complete
// questions and sentences with a 300-1200 ms pause at a comma or inside a
// phrase (put into the whole synthesized sentence, speakPaused), spoken by
// flite and espeak-ng voices, plus the real recordings of
// pocketsphinx-testdata (each is one turn: a commit inside it is a cut-off).

const benchRate = 16000

const benchTurnsUsage = `usage: voxpipe bench turns [flags]

Streams complete questions and sentences with pauses to two in-process servers
(the config, and the config with pipeline.turn.mode=silence) over /ws, and
prints heard latency p50/p95 over the complete questions and, apart, over
short everyday turns, and the false cut-off rate over the paused sentences
for each, with 95% intervals, and the paused sentences cut by one server
only (paired: both heard the same audio). --baseline-set
pipeline.turn.mode=semantic --baseline-set pipeline.turn.model=M compares two
end-of-turn scorers instead (the baseline's figures are then those labelled
silence).
`

type benchItem struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"` // complete | paused | real
	Voice   string `json:"voice,omitempty"`
	PauseMs int    `json:"pause_ms,omitempty"`
	Text    string `json:"text,omitempty"`
	Round   int    `json:"round,omitempty"` // with --rounds: 0, 1, ... (seed + round)

	dir       string  // a recording's folder
	pcm       []int16 // 16 kHz, lead silence included, no tail
	speechEnd int     // index after the last audible sample
	roomRMS   float64 // the room's noise after pcm (0: quiet, about -70 dBFS)
	tail      []int16 // the room after pcm, looped, instead of roomRMS noise (bench rooms)
}

type itemRun struct {
	Item    string   `json:"item"`
	Round   int      `json:"round,omitempty"`
	Mode    string   `json:"mode"`
	Finals  []string `json:"finals"`
	HeardMs *float64 `json:"heard_ms,omitempty"`
	// From the first turn's trace event.
	ServerV2VMs  *float64 `json:"server_voice_to_voice_ms,omitempty"`
	EOUScore     *float64 `json:"eou_score,omitempty"`
	EndSilenceMs int      `json:"end_silence_ms,omitempty"`
	EndPitch     *float64 `json:"end_pitch,omitempty"`
	Intonation   *float64 `json:"intonation,omitempty"`
	Speculative  bool     `json:"speculative,omitempty"`
	CutOff       bool     `json:"cut_off,omitempty"`
	Err          string   `json:"error,omitempty"`
}

type modeSummary struct {
	Mode          string  `json:"mode"`
	HeardP50Ms    float64 `json:"heard_p50_ms"`
	HeardP95Ms    float64 `json:"heard_p95_ms"`
	HeardN        int     `json:"heard_n"`
	ShortHeardP50 float64 `json:"short_heard_p50_ms"` // over the short everyday turns (questions.Short)
	ShortHeardP95 float64 `json:"short_heard_p95_ms"`
	ShortN        int     `json:"short_heard_n"`
	NoAnswer      int     `json:"complete_without_answer"`
	CutOffs       int     `json:"false_cutoffs"`
	Paused        int     `json:"paused_utterances"`
	CutOffRate    float64 `json:"false_cutoff_rate"`
	RealCutOffs   int     `json:"real_recording_cutoffs"`
	Real          int     `json:"real_recordings"`
	RealHeardP50  float64 `json:"real_heard_p50_ms"`
	RealHeardP95  float64 `json:"real_heard_p95_ms"`
	Speculative   int     `json:"speculative_turns"`
	MeanEndSilMs  float64 `json:"complete_mean_end_silence_ms"`
	ServerV2VP50  float64 `json:"server_v2v_p50_ms"`
	Errors        int     `json:"errors"`
	// 95% intervals (bench_stats.go): the quantiles' from order
	// statistics, [lo, hi] with hi the largest value while the sample is
	// too small to bound it (HeardP95Open); the cut-off rate's Wilson.
	HeardP50CI      [2]float64 `json:"heard_p50_ci95_ms"`
	HeardP95CI      [2]float64 `json:"heard_p95_ci95_ms"`
	HeardP95Open    bool       `json:"heard_p95_ci95_open,omitempty"`
	CutOffRateCI    [2]float64 `json:"false_cutoff_rate_ci95"`
	CutOffsPerRound []int      `json:"false_cutoffs_per_round"`

	completeHeard []float64
}

type turnsReport struct {
	Config   map[string]string `json:"config"`
	Semantic modeSummary       `json:"semantic"`
	Silence  modeSummary       `json:"silence"`
	Items    []benchItem       `json:"items"`
	Runs     []itemRun         `json:"runs"`
	// The paused sentences, each heard by both servers: how the two
	// differ on the same audio.
	PairedCutOffs pairedCutOffs `json:"paired_cutoffs"`
}

type pairedCutOffs struct {
	Both         int     `json:"both"`
	SemanticOnly int     `json:"semantic_only"`
	BaselineOnly int     `json:"baseline_only"` // the server labelled silence
	McNemarP     float64 `json:"mcnemar_p"`
}

// pairCutOffs counts the paused sentences cut off by both servers or by one.
func pairCutOffs(items []benchItem, runs []itemRun) pairedCutOffs {
	var p pairedCutOffs
	for i := range items {
		if items[i].Kind != "paused" {
			continue
		}
		var sem, base bool
		for _, r := range runs[2*i : 2*i+2] {
			if r.Mode == "semantic" {
				sem = r.CutOff
			} else {
				base = r.CutOff
			}
		}
		switch {
		case sem && base:
			p.Both++
		case sem:
			p.SemanticOnly++
		case base:
			p.BaselineOnly++
		}
	}
	p.McNemarP = mcnemarP(p.SemanticOnly, p.BaselineOnly)
	return p
}

// printSummary writes one server's figures, each kind only when the run had
// some, with the 95% intervals after the figure.
func printSummary(w io.Writer, s modeSummary) {
	var b strings.Builder
	if s.HeardN > 0 {
		p95hi := fmt.Sprintf("%.0f", s.HeardP95CI[1])
		if s.HeardP95Open {
			p95hi = "max " + p95hi
		}
		fmt.Fprintf(&b, "  heard p50 %.0f ms [%.0f-%.0f]  p95 %.0f ms [%.0f-%s] (n %d, %d without answer)",
			s.HeardP50Ms, s.HeardP50CI[0], s.HeardP50CI[1], s.HeardP95Ms, s.HeardP95CI[0], p95hi, s.HeardN, s.NoAnswer)
	}
	if s.ShortN > 0 {
		fmt.Fprintf(&b, "  short turns p50 %.0f p95 %.0f ms (n %d)", s.ShortHeardP50, s.ShortHeardP95, s.ShortN)
	}
	if s.Paused > 0 {
		fmt.Fprintf(&b, "  false cut-offs %d/%d (%.1f%% [%.1f-%.1f], per round %v)", s.CutOffs, s.Paused, 100*s.CutOffRate,
			100*s.CutOffRateCI[0], 100*s.CutOffRateCI[1], s.CutOffsPerRound)
	}
	if s.Real > 0 {
		fmt.Fprintf(&b, "  real recordings cut %d/%d, heard p50 %.0f p95 %.0f ms", s.RealCutOffs, s.Real, s.RealHeardP50, s.RealHeardP95)
	}
	fmt.Fprintf(w, "%-9s%s  speculative %d  errors %d\n", s.Mode, b.String(), s.Speculative, s.Errors)
}

func (w *Wiring) runBench(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "turns" {
		return fmt.Errorf("%w: voxpipe bench turns [flags]", errCommandLine)
	}
	fs := flag.NewFlagSet("bench turns", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchTurnsUsage); fs.PrintDefaults() }
	cfgPath := fs.String("config", w.DefaultConfig, "config file")
	var sets, baseSets multiFlag
	fs.Var(&sets, "set", "key=value for both servers (repeatable)")
	fs.Var(&baseSets, "baseline-set", "key=value for the baseline server only (repeatable)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("only", "", "complete | short | paused | real: run only that kind")
	limit := fs.Int("limit", 0, "at most this many utterances of each kind (0: all)")
	parallel := fs.Int("parallel", 1, "utterances streamed at once")
	seed := fs.Uint64("seed", 11, "seed of the pauses and noise")
	rounds := fs.Int("rounds", 1, "play the corpus this many times, with seeds seed, seed+1, ..., and pool the figures\n(one round's 48 paused sentences are too few to tell a change of 2-3 cut-offs from noise)")
	logLevel := fs.String("log", "warn", "server log level (debug shows each turn's decisions)")
	port := fs.Int("port", 0, "loopback ports of the two servers: port and port+1 (0: any free ones)")
	devices := fs.Bool("devices", false, "stream each voice's utterances (a recording's: its folder's) as one device,\nwhose speaker each server may remember between sessions (pipeline.turn.remember_speakers)")
	var realDirs multiFlag
	fs.Var(&realDirs, "real-dir", "a folder of WAV recordings by real speakers, each one complete turn, added to the real kind\n(repeatable; e.g. make asr-sets' build/asrsets/asterisk-16k)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if *rounds < 1 || *rounds > 100 {
		return fmt.Errorf("%w: --rounds %d (want 1..100)", errCommandLine, *rounds)
	}
	cfg, err := w.LoadConfig(*cfgPath, "127.0.0.1:0", sets)
	if err != nil {
		return err
	}
	baseline, err := w.LoadConfig(*cfgPath, "127.0.0.1:0", append(append(multiFlag{}, sets...), append(multiFlag{"pipeline.turn.mode=silence"}, baseSets...)...))
	if err != nil {
		return err
	}
	lvl, err := zerolog.ParseLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("%w: --log %q: %w", errCommandLine, *logLevel, err)
	}
	log := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
	be, closers, err := w.OpenBackends(cfg, log)
	if err != nil {
		return err
	}
	defer func() { _ = w.CloseAll(closers) }()
	// The servers share the backends, except the end-of-turn scorer when
	// --baseline-set gives the baseline another (two scorers compared in
	// one run, on the same utterances at the same time).
	baseBe := be
	if t := baseline.Pipeline.Turn; t.Mode == string(endturn.ModeSemantic) && (be.EOU == nil || t.Model != cfg.Pipeline.Turn.Model) {
		eou, err := endturn.OpenLM(t.Model, t.Threads, w.SessionCaches(baseline))
		if err != nil {
			return fmt.Errorf("bench turns: baseline pipeline.turn.model (%s): %w", t.Model, err)
		}
		defer eou.Close()
		baseBe.EOU = eou
	}
	// Each server remembers its own speakers, as its config says.
	be.Speakers, baseBe.Speakers = w.Speakers(cfg), w.Speakers(baseline)

	urls := map[string]string{}
	for k, c := range []*config.Config{cfg, baseline} {
		mode := []string{"semantic", "silence"}[k]
		be := []pipeline.Backends{be, baseBe}[k]
		addr := "127.0.0.1:0"
		if *port > 0 {
			addr = fmt.Sprintf("127.0.0.1:%d", *port+k)
		}
		url, stop, err := w.benchServer(c, be, addr, log) //nolint:contextcheck // the server lives until stop(), not the caller's context
		if err != nil {
			return err
		}
		defer stop()
		urls[mode] = url
	}
	maxWait := time.Duration(max(cfg.Pipeline.Turn.MaxSilenceMs, cfg.Pipeline.VAD.EndSilenceMs, baseline.Pipeline.VAD.EndSilenceMs)) * time.Millisecond

	var items []benchItem
	var runs []itemRun
	for r := range *rounds {
		corpus, err := benchCorpus(ctx, *seed+uint64(r), *only, *limit, realDirs)
		if err != nil {
			return err
		}
		for i := range corpus {
			corpus[i].Round = r
		}
		if !*jsonOut {
			fmt.Fprintf(os.Stderr, "bench turns: round %d of %d (seed %d): %d utterances, two servers, parallel %d\n", r+1, *rounds, *seed+uint64(r), len(corpus), *parallel)
		}
		items = append(items, corpus...)
		runs = append(runs, playRound(ctx, corpus, urls, *parallel, *devices, *jsonOut, maxWait)...)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep := turnsReport{Items: items, Runs: runs, Config: map[string]string{
		"mode": cfg.Pipeline.Turn.Mode, "min_silence_ms": fmt.Sprint(cfg.Pipeline.Turn.MinSilenceMs),
		"max_silence_ms": fmt.Sprint(cfg.Pipeline.Turn.MaxSilenceMs), "threshold": fmt.Sprint(cfg.Pipeline.Turn.Threshold),
		"speculative": fmt.Sprint(cfg.Pipeline.Turn.Speculative), "baseline_end_silence_ms": fmt.Sprint(baseline.Pipeline.VAD.EndSilenceMs),
		"rounds": fmt.Sprint(*rounds), "seed": fmt.Sprint(*seed),
	}}
	rep.Semantic = summarise("semantic", items, runs)
	rep.Silence = summarise("silence", items, runs)
	rep.PairedCutOffs = pairCutOffs(items, runs)
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		rep.Semantic.zeroNaN()
		rep.Silence.zeroNaN()
		return enc.Encode(rep)
	}
	for _, s := range []modeSummary{rep.Semantic, rep.Silence} {
		printSummary(stdout, s)
	}
	if p := rep.PairedCutOffs; p.Both+p.SemanticOnly+p.BaselineOnly > 0 {
		fmt.Fprintf(stdout, "paired    paused sentences cut by both %d, semantic only %d, silence only %d (McNemar p %.3g)\n", p.Both, p.SemanticOnly, p.BaselineOnly, p.McNemarP)
	}
	return nil
}

// playRound streams every item of one round to both servers, parallel at
// a time, each item to one server and then the other (the order
// alternates), and returns two runs per item in item order.
func playRound(ctx context.Context, items []benchItem, urls map[string]string, parallel int, devices, quiet bool, maxWait time.Duration) []itemRun {
	runs := make([]itemRun, 2*len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, parallel))
	for i := range items {
		modes := []string{"semantic", "silence"}
		if i%2 == 1 {
			modes = []string{"silence", "semantic"}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for k, mode := range modes {
				device := ""
				if devices {
					device = items[i].device()
				}
				r := streamItem(ctx, urls[mode], &items[i], device, maxWait)
				r.Mode, r.Round = mode, items[i].Round
				runs[2*i+k] = r
				if !quiet {
					score := "-"
					if r.EOUScore != nil {
						score = fmt.Sprintf("%.2f", *r.EOUScore)
					}
					fmt.Fprintf(os.Stderr, "%-9s %-8s %-14s finals %d heard %-8s server v2v %-8s eou %s waited %d ms spec %v %q\n", mode, items[i].Kind,
						items[i].Name, len(r.Finals), fmtMs(r.HeardMs), fmtMs(r.ServerV2VMs), score, r.EndSilenceMs, r.Speculative, r.Finals)
				}
			}
		}()
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	return runs
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func fmtMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", *v)
}

// benchServer serves c's pipeline on a loopback port.
func (w *Wiring) benchServer(c *config.Config, be pipeline.Backends, addr string, log zerolog.Logger) (string, func(), error) {
	ws, err := web.New(web.Config{MaxSessions: 64, MaxFrameBytes: c.Server.MaxFrameBytes, IdleTimeout: c.Server.IdleTimeout,
		RTC: w.RTC(c.Server.RTC), Pipeline: w.Pipeline(c)}, be, log)
	if err != nil {
		return "", nil, err
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: ws.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with ErrServerClosed at stop
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = ws.Shutdown(ctx)
		_ = srv.Shutdown(ctx)
	}
	return "ws://" + ln.Addr().String() + "/ws", stop, nil
}

// zeroNaN puts 0 for the figures a run had nothing to measure for (--only
// real has no complete questions): JSON has no NaN.
func (s *modeSummary) zeroNaN() {
	for _, v := range []*float64{&s.HeardP50CI[0], &s.HeardP50CI[1], &s.HeardP95CI[0], &s.HeardP95CI[1], &s.HeardP50Ms, &s.HeardP95Ms, &s.ShortHeardP50, &s.ShortHeardP95, &s.RealHeardP50, &s.RealHeardP95, &s.ServerV2VP50} {
		if math.IsNaN(*v) {
			*v = 0
		}
	}
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(len(s)-1, i))]
}

func summarise(mode string, items []benchItem, runs []itemRun) modeSummary {
	s := modeSummary{Mode: mode}
	var endSil, v2v, realHeard, shortHeard []float64
	for i, r := range runs {
		if r.Mode != mode {
			continue
		}
		it := items[i/2]
		if r.Err != "" {
			s.Errors++
		}
		if r.Speculative {
			s.Speculative++
		}
		switch it.Kind {
		case "complete":
			if r.HeardMs == nil {
				s.NoAnswer++
				continue
			}
			s.completeHeard = append(s.completeHeard, *r.HeardMs)
			if r.EndSilenceMs > 0 {
				endSil = append(endSil, float64(r.EndSilenceMs))
			}
			if r.ServerV2VMs != nil {
				v2v = append(v2v, *r.ServerV2VMs)
			}
		case "short":
			if r.HeardMs == nil {
				s.NoAnswer++
				continue
			}
			shortHeard = append(shortHeard, *r.HeardMs)
		case "paused":
			s.Paused++
			for len(s.CutOffsPerRound) <= it.Round {
				s.CutOffsPerRound = append(s.CutOffsPerRound, 0)
			}
			if r.CutOff {
				s.CutOffs++
				s.CutOffsPerRound[it.Round]++
			}
		case "real":
			s.Real++
			if r.CutOff {
				s.RealCutOffs++
			} else if r.HeardMs != nil {
				realHeard = append(realHeard, *r.HeardMs)
			}
		}
	}
	s.HeardN = len(s.completeHeard)
	s.HeardP50Ms, s.HeardP95Ms = percentile(s.completeHeard, 0.5), percentile(s.completeHeard, 0.95)
	sorted := append([]float64(nil), s.completeHeard...)
	sort.Float64s(sorted)
	s.HeardP50CI[0], s.HeardP50CI[1], _ = quantileCI(sorted, 0.5)
	s.HeardP95CI[0], s.HeardP95CI[1], s.HeardP95Open = quantileCI(sorted, 0.95)
	s.ServerV2VP50 = percentile(v2v, 0.5)
	s.RealHeardP50, s.RealHeardP95 = percentile(realHeard, 0.5), percentile(realHeard, 0.95)
	s.ShortN = len(shortHeard)
	s.ShortHeardP50, s.ShortHeardP95 = percentile(shortHeard, 0.5), percentile(shortHeard, 0.95)
	if len(endSil) > 0 {
		var sum float64
		for _, v := range endSil {
			sum += v
		}
		s.MeanEndSilMs = sum / float64(len(endSil))
	}
	if s.Paused > 0 {
		s.CutOffRate = float64(s.CutOffs) / float64(s.Paused)
		s.CutOffRateCI[0], s.CutOffRateCI[1] = wilson(s.CutOffs, s.Paused)
	}
	return s
}

// device is the device an item is spoken at with --devices: its voice, or
// a recording's folder (one speaker, or the server finds out it is not).
func (it *benchItem) device() string {
	if it.Kind == "real" {
		return "real:" + it.dir
	}
	return it.Voice
}

// streamItem plays one utterance to the server at url in real time, as
// device ("" = none), and records what came back.
func streamItem(ctx context.Context, url string, it *benchItem, device string, maxWait time.Duration) itemRun {
	r := itemRun{Item: it.Name}
	fail := func(err error) itemRun { r.Err = err.Error(); return r }
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ws, resp, err := websocket.DefaultDialer.DialContext(dctx, url, nil)
	cancel()
	if err != nil {
		return fail(err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	hello := map[string]any{"type": "start", "sample_rate": benchRate, "encoding": "pcm16",
		"output_sample_rate": benchRate, "client": map[string]string{"name": "voxpipe-bench-turns"}}
	if device != "" {
		hello["device"] = device
	}
	if err := ws.WriteJSON(hello); err != nil {
		return fail(err)
	}
	var ready pipeline.Event
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&ready); err != nil || ready.Type != pipeline.EventReady {
		return fail(fmt.Errorf("no ready event: %w %s", err, ready.Message))
	}
	_ = ws.SetReadDeadline(time.Time{})

	var mu sync.Mutex
	var speechEndAt time.Time // when the last audible sample was spoken
	var firstAudible time.Time
	var finals []time.Time
	var trace *pipeline.Event
	got := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			switch typ {
			case websocket.BinaryMessage:
				if firstAudible.IsZero() && !speechEndAt.IsZero() {
					pcm := make([]int16, len(data)/2)
					for i := range pcm {
						pcm[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
					}
					if k := audio.FirstAudible(pcm, benchRate); k >= 0 {
						firstAudible = now.Add(time.Duration(k) * time.Second / benchRate)
						select {
						case got <- struct{}{}:
						default:
						}
					}
				}
			case websocket.TextMessage:
				var ev pipeline.Event
				if json.Unmarshal(data, &ev) == nil {
					switch {
					case ev.Type == pipeline.EventTranscript && ev.Final:
						r.Finals = append(r.Finals, ev.Text)
						finals = append(finals, now)
					case ev.Type == pipeline.EventTrace && trace == nil:
						trace = &ev
					}
				}
			}
			mu.Unlock()
		}
	}()

	// Stream: a frame goes out when its last sample has been "spoken".
	const frame = benchRate / 50
	tail := maxWait + 1500*time.Millisecond
	total := len(it.pcm) + int(tail.Seconds()*benchRate)
	noise := rand.New(rand.NewPCG(uint64(len(it.pcm)), 7))
	room := it.roomRMS
	if room == 0 {
		room = quietRoomRMS
	}
	buf := make([]byte, 2*frame)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for f := 0; f*frame < total; f++ {
		for i := range frame {
			n := f*frame + i
			var v int16
			switch {
			case n < len(it.pcm):
				v = it.pcm[n]
			case it.tail != nil:
				v = it.tail[(n-len(it.pcm))%len(it.tail)]
			default:
				v = int16(noise.NormFloat64() * room) // the room after speech
			}
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(v))
		}
		if err := ws.WriteMessage(websocket.BinaryMessage, buf); err != nil {
			return fail(err)
		}
		now := time.Now()
		if end := (f + 1) * frame; end >= it.speechEnd && f*frame < it.speechEnd {
			mu.Lock()
			speechEndAt = now.Add(-time.Duration(end-it.speechEnd) * time.Second / benchRate)
			mu.Unlock()
		}
		mu.Lock()
		done := !firstAudible.IsZero() && it.Kind == "complete"
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-tick.C:
		}
	}
	_ = start
	// Interrupt whatever plays, so that the turn's trace comes now.
	_ = ws.WriteJSON(map[string]any{"type": "interrupt", "played_ms": 0})
	select {
	case <-readDone:
	case <-time.After(1500 * time.Millisecond):
	}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		mu.Lock()
		have := trace != nil
		mu.Unlock()
		if have {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = ws.WriteJSON(map[string]string{"type": "stop"})
	_ = ws.SetReadDeadline(time.Now().Add(time.Second))
	mu.Lock()
	defer mu.Unlock()
	if !firstAudible.IsZero() && !speechEndAt.IsZero() {
		ms := float64(firstAudible.Sub(speechEndAt)) / float64(time.Millisecond)
		r.HeardMs = &ms
	}
	// A cut-off: more than one turn, or a turn committed before the speech ended.
	r.CutOff = len(finals) > 1 || (len(finals) == 1 && !speechEndAt.IsZero() && finals[0].Before(speechEndAt))
	if trace != nil {
		r.ServerV2VMs, r.EOUScore, r.EndSilenceMs, r.Speculative = trace.VoiceToVoiceMs, trace.EOUScore, trace.EndSilenceMs, trace.Speculative
		r.EndPitch, r.Intonation = trace.EndPitch, trace.Intonation
	}
	return r
}

// ------------------------------------------------------------------ corpus

// Sentences with a pause: the first part, then the rest after the pause
// (at a comma, or inside a phrase where people hesitate).
var benchPaused = [][2]string{
	{"If it rains tomorrow,", "should I take an umbrella to work?"},
	{"When I get home tonight,", "remind me to water the plants."},
	{"Before the meeting starts,", "can you tell me what is on my calendar?"},
	{"Actually,", "what is the tallest mountain in Europe?"},
	{"By the way,", "how many ounces are in a pound?"},
	{"So my question is,", "why do cats purr?"},
	{"Okay, listen,", "I need a recipe for banana bread."},
	{"After I finish work,", "what is a good place to eat nearby?"},
	{"Can you tell me", "how far it is from Paris to Berlin?"},
	{"What is the", "best way to learn a new language?"},
	{"I would like to know", "what time the pharmacy opens."},
	{"How do I", "change a flat tire on my bike?"},
	{"Set an alarm for", "six thirty in the morning."},
	{"What's the difference between", "a virus and a bacterium?"},
	{"Tell me about", "the history of the printing press."},
	{"Could you explain how", "a refrigerator keeps food cold?"},
	{"I want to", "book a table for two at eight."},
	{"Is it going to be", "sunny this weekend in Madrid?"},
	{"Play some music by", "a jazz pianist from New Orleans."},
	{"How long should I", "bake a chicken in the oven?"},
	{"What did you say the", "name of that river was?"},
	{"Send a message to my brother", "saying I will be late."},
	{"The last time I checked,", "the train left at nine. Is that still right?"},
	{"If I leave at noon,", "will I make it to the airport on time?"},
}

type benchVoice struct {
	name  string
	synth tts.Synthesizer
}

func benchVoices() ([]benchVoice, error) {
	var out []benchVoice
	for _, v := range []string{"slt", "kal16", "awb", "rms"} {
		s, err := ttsflite.New(ttsflite.Config{Voice: v, Rate: 1})
		if err != nil {
			continue
		}
		out = append(out, benchVoice{"flite-" + v, s})
	}
	for _, v := range []string{"en-us", "en"} {
		c := ttsespeak.DefaultConfig()
		c.Voice = v
		s, err := ttsespeak.New(c)
		if err != nil {
			continue
		}
		out = append(out, benchVoice{"espeak-" + v, s})
	}
	if len(out) == 0 {
		return nil, errors.New("bench turns: no flite or espeak-ng voice could be opened")
	}
	return out, nil
}

// speak synthesizes text at 16 kHz with its leading and trailing silence cut.
func speak(ctx context.Context, s tts.Synthesizer, text string) ([]int16, error) {
	pcm, _, err := synthesize(ctx, s, text)
	if err != nil {
		return nil, err
	}
	out, err := audibleAt16k(pcm, s.SampleRate())
	if err != nil {
		return nil, fmt.Errorf("%w in %q", err, text)
	}
	return out, nil
}

// speakPaused synthesizes first and rest as one sentence and cuts it after
// first's last word (at the synthesizer's word mark), so that the words
// before the pause keep the pitch and timing of the middle of a sentence, as
// when a person pauses, rather than the fall of a sentence end that
// synthesizing first alone would give them. The synthesizer's own gap at
// the cut (a comma's) is left out: the caller inserts the pause.
func speakPaused(ctx context.Context, s tts.Synthesizer, first, rest string) (a, b []int16, err error) {
	text := first + " " + rest
	pcm, marks, err := synthesize(ctx, s, text)
	if err != nil {
		return nil, nil, err
	}
	words := len(strings.TrimRight(first, " ,;:.!?"))
	cut := -1
	for _, m := range marks {
		if m.TextEnd >= words {
			cut = m.EndSample
			break
		}
	}
	if cut <= 0 || cut >= len(pcm) {
		return nil, nil, fmt.Errorf("no word mark between %q and %q (marks %v)", first, rest, marks)
	}
	if a, err = audibleAt16k(pcm[:cut], s.SampleRate()); err != nil {
		return nil, nil, fmt.Errorf("%w before the pause in %q", err, text)
	}
	if b, err = audibleAt16k(pcm[cut:], s.SampleRate()); err != nil {
		return nil, nil, fmt.Errorf("%w after the pause in %q", err, text)
	}
	return a, b, nil
}

// synthesize returns text's audio at the synthesizer's rate and its word
// marks (sample offsets into that audio).
func synthesize(ctx context.Context, s tts.Synthesizer, text string) ([]int16, []tts.WordMark, error) {
	ch := make(chan tts.Chunk, 16)
	errc := make(chan error, 1)
	go func() { errc <- s.Synthesize(ctx, text, ch); close(ch) }()
	var pcm []int16
	var marks []tts.WordMark
	for c := range ch {
		marks = append(marks, c.Words...)
		pcm = append(pcm, c.PCM...)
	}
	if err := <-errc; err != nil {
		return nil, nil, err
	}
	return pcm, marks, nil
}

// audibleAt16k resamples pcm to 16 kHz and cuts its leading and trailing
// silence.
func audibleAt16k(pcm []int16, rate int) ([]int16, error) {
	pcm, err := to16k(pcm, rate)
	if err != nil {
		return nil, err
	}
	start, end := audio.FirstAudible(pcm, benchRate), audio.AudibleEnd(pcm, benchRate)
	if start < 0 || end <= start {
		return nil, errors.New("no audible speech")
	}
	return pcm[start:end], nil
}

// to16k resamples pcm from rate to the bench's 16 kHz.
func to16k(pcm []int16, rate int) ([]int16, error) {
	if rate == benchRate {
		return pcm, nil
	}
	rs, err := audio.NewResampler(rate, benchRate)
	if err != nil {
		return nil, err
	}
	return append(rs.Process(nil, pcm), rs.Flush(nil)...), nil
}

// quietRoomRMS is the noise of a quiet room around synthesized speech:
// about -70 dBFS.
const quietRoomRMS = 10

func silence(ms int, rng *rand.Rand) []int16 { return roomNoise(ms, quietRoomRMS, rng) }

// roomNoise is ms of Gaussian noise at rms.
func roomNoise(ms int, rms float64, rng *rand.Rand) []int16 {
	out := make([]int16, ms*benchRate/1000)
	for i := range out {
		out[i] = int16(rng.NormFloat64() * rms)
	}
	return out
}

// benchCorpus builds the utterances (in memory only).
func benchCorpus(ctx context.Context, seed uint64, only string, limit int, realDirs []string) ([]benchItem, error) {
	voices, err := benchVoices()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, v := range voices {
			if c, ok := v.synth.(io.Closer); ok {
				c.Close()
			}
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 99))
	var items []benchItem
	add := func(it benchItem) { items = append(items, it) }
	want := func(kind string, n int) bool { return (only == "" || only == kind) && (limit == 0 || n < limit) }
	n := 0
	// Whole turns, each text in two voices: the questions, then the short
	// everyday turns.
	for _, set := range []struct {
		kind  string
		texts []string
	}{{"complete", questions.Complete}, {"short", questions.Short}} {
		n = 0
		for i := 0; i < 2*len(set.texts) && want(set.kind, n); i++ {
			q, v := set.texts[i%len(set.texts)], voices[(i+i/len(set.texts))%len(voices)]
			pcm, err := speak(ctx, v.synth, q)
			if err != nil {
				return nil, err
			}
			lead := silence(300, rng)
			add(benchItem{Name: fmt.Sprintf("%s-%02d", set.kind, i), Kind: set.kind, Voice: v.name, Text: q,
				pcm: append(lead, pcm...), speechEnd: len(lead) + len(pcm)})
			n++
		}
	}
	n = 0
	for i := 0; i < 2*len(benchPaused) && want("paused", n); i++ {
		p, v := benchPaused[i%len(benchPaused)], voices[(i+1+i/len(benchPaused))%len(voices)]
		a, b, err := speakPaused(ctx, v.synth, p[0], p[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		pause := 300 + rng.IntN(901)
		pcm := append(silence(300, rng), a...)
		pcm = append(append(pcm, silence(pause, rng)...), b...)
		add(benchItem{Name: fmt.Sprintf("paused-%02d", i), Kind: "paused", Voice: v.name, PauseMs: pause,
			Text: p[0] + " … " + p[1], pcm: pcm, speechEnd: len(pcm)})
		n++
	}
	if only == "" || only == "real" {
		real, err := realRecordings(rng)
		if err != nil {
			return nil, err
		}
		for i, it := range real {
			if limit > 0 && i >= limit {
				break
			}
			add(it)
		}
		for _, dir := range realDirs {
			wavs, err := filepath.Glob(filepath.Join(dir, "*.wav"))
			if err != nil || len(wavs) == 0 {
				return nil, fmt.Errorf("%w: --real-dir %s: no .wav files", errCommandLine, dir)
			}
			sort.Strings(wavs)
			for i, p := range wavs {
				if limit > 0 && i >= limit {
					break
				}
				it, err := recordingItem(p, rng)
				if err != nil {
					return nil, err
				}
				if it != nil {
					add(*it)
				}
			}
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: --only %q selects nothing (complete, short, paused or real)", errCommandLine, only)
	}
	return items, nil
}

// realRecordings are pocketsphinx-testdata's 16 kHz recordings, each one
// turn (several have pauses between phrases); absent files are skipped.
func realRecordings(rng *rand.Rand) ([]benchItem, error) {
	const dir = "/usr/share/pocketsphinx/test/data"
	var paths []string
	for _, p := range []string{"goforward.raw", "something.raw", "numbers.raw"} {
		paths = append(paths, filepath.Join(dir, p))
	}
	wavs, _ := filepath.Glob(filepath.Join(dir, "librivox", "*.wav"))
	paths = append(paths, wavs...)
	cards, _ := filepath.Glob(filepath.Join(dir, "cards", "*.wav"))
	paths = append(paths, cards...)
	var out []benchItem
	for _, p := range paths {
		it, err := recordingItem(p, rng)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if it != nil {
			out = append(out, *it)
		}
	}
	return out, nil
}

// recordingItem reads a .raw (16 kHz PCM16) or .wav recording as one real
// turn: resampled to 16 kHz, cut after its last audible sample, 300 ms of
// noise in front; its speech ends where its last word does
// (audio.RecordingSpeechEnd). nil when it holds nothing audible.
func recordingItem(p string, rng *rand.Rand) (*benchItem, error) {
	var pcm []int16
	if strings.HasSuffix(p, ".raw") {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		pcm = make([]int16, len(raw)/2)
		for i := range pcm {
			pcm[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	} else {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		w, err := audio.DecodeWAV(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		pcm = w.Mono()
		if w.SampleRate != benchRate {
			rs, err := audio.NewResampler(w.SampleRate, benchRate)
			if err != nil {
				return nil, err
			}
			pcm = rs.Process(nil, pcm)
		}
	}
	end := audio.AudibleEnd(pcm, benchRate)
	if end <= 0 {
		return nil, nil
	}
	// Room noise after the last word is not speech: counting it made turns
	// that ended on the last word read as committed "before the speech
	// ended", with a heard latency of a few ms.
	speech, quiet := audio.RecordingSpeechEnd(pcm, benchRate)
	speech = min(speech, end)
	// The recording's room goes on around it at its quietest level: padding
	// far below it made its room noise stand out as speech to the server's
	// VAD, which then heard the speech end with the recording.
	room := max(quietRoomRMS, 32768*math.Pow(10, quiet/20))
	lead := roomNoise(300, room, rng)
	pcm = append(lead, pcm[:end]...)
	name := "real-" + strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
	return &benchItem{Name: name, Kind: "real", dir: filepath.Dir(p), pcm: pcm, speechEnd: len(lead) + speech, roomRMS: room}, nil
}
