package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
)

// voxpipe bench rooms: the project's real recordings in rooms, for each
// speech detector (pipeline.vad.detector), in the same run.

const benchRoomsUsage = `usage: voxpipe bench rooms [flags]

Mixes pocketsphinx-testdata's recordings with the noise of rooms (pink,
brown, babble, music, tv) at each SNR, and reports for each condition and
each speech detector (pipeline.vad.detector energy and silero):

  vad:   utterances whose start was found, the start's delay after the
         first word's onset, starts before it (noise taken for speech),
         the wait from the last word to speech_end, and splits;
  noise: turns started per minute by the noise alone, at each SNR's level;
  live (with --live): WER and heard latency (last word to the first audible
         answer sample) through two in-process servers over /ws, in real time.

The audio is made at run time and never written to disk.
`

type roomCond struct {
	Noise string  `json:"noise"` // "" = clean
	SNR   float64 `json:"snr_db"`
}

func (c roomCond) String() string {
	if c.Noise == "" {
		return "clean"
	}
	return fmt.Sprintf("%s %gdB", c.Noise, c.SNR)
}

// vadRoom is one detector's offline figures in one condition.
type vadRoom struct {
	Cond      roomCond `json:"condition"`
	Detector  string   `json:"detector"`
	Utts      int      `json:"utterances"`
	Found     int      `json:"found"`       // a start between the onset and the last word
	EarlyOn   int      `json:"early_start"` // a start before the onset: the noise's
	StartP50  float64  `json:"start_delay_p50_ms"`
	EndWait50 float64  `json:"end_wait_p50_ms"` // last word to speech_end
	EndWait95 float64  `json:"end_wait_p95_ms"`
	NoEnd     int      `json:"no_end"` // no speech_end within 3 s of the last word
	Splits    int      `json:"splits"` // a speech_end before the last word
}

// noiseRoom is one detector's starts on speech-free noise.
type noiseRoom struct {
	Noise     string  `json:"noise"`
	LevelDBFS float64 `json:"level_dbfs"`
	Detector  string  `json:"detector"`
	Minutes   float64 `json:"minutes"`
	Starts    int     `json:"starts"`
	PerMinute float64 `json:"starts_per_minute"`
	// Settled: the starts after the first settleSec (the energy VAD's
	// floor starts from the first frame and needs a while to reach a loud
	// room; a session that opens in the noise pays for that once).
	Settled    int     `json:"settled_starts"`
	SettledMin float64 `json:"settled_starts_per_minute"`
	// InSpeech is the share of the time the VAD was in an utterance: one
	// start that never ends shows here, not in Starts.
	InSpeech float64 `json:"in_speech"`
}

// settleSec is when vadOnNoise starts counting settled starts.
const settleSec = 10

// liveRoom is one server's figures in one condition.
type liveRoom struct {
	Cond       roomCond `json:"condition"`
	Detector   string   `json:"detector"`
	Utts       int      `json:"utterances"`
	WER        float64  `json:"wer"`
	HeardP50   float64  `json:"heard_p50_ms"`
	HeardP95   float64  `json:"heard_p95_ms"`
	HeardN     int      `json:"heard_n"`
	NoAnswer   int      `json:"no_answer"`
	ExtraTurns int      `json:"extra_turns"` // finals beyond one per utterance
	Errors     int      `json:"errors"`
}

type roomsReport struct {
	VAD   []vadRoom   `json:"vad"`
	Noise []noiseRoom `json:"noise"`
	Live  []liveRoom  `json:"live,omitempty"`
}

var roomDetectors = []string{audio.DetectorEnergy, audio.DetectorSilero}

func parseSNRs(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < -10 || v > 60 {
			return nil, fmt.Errorf("%w: SNR %q (want dB in -10..60)", errCommandLine, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func (w *Wiring) runBenchRooms(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench rooms", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchRoomsUsage); fs.PrintDefaults() }
	cfgPath := fs.String("config", w.DefaultConfig, "config file")
	var sets multiFlag
	fs.Var(&sets, "set", "key=value for both detectors (repeatable)")
	noises := fs.String("noises", strings.Join(allNoises, ","), "noises to mix, comma-separated")
	snrList := fs.String("snrs", "0,5,10,20", "SNRs in dB, comma-separated")
	minutes := fs.Float64("noise-minutes", 2, "minutes of each speech-free noise at each level")
	live := fs.Bool("live", false, "also stream the mixes to two servers for WER and heard latency (real time)")
	liveSNRs := fs.String("live-snrs", "10", "SNRs of the live run")
	liveNoises := fs.String("live-noises", "pink,babble,music", "noises of the live run (clean is always run)")
	limit := fs.Int("limit", 0, "at most this many recordings (0: all)")
	parallel := fs.Int("parallel", 2, "live: utterances streamed at once")
	seed := fs.Uint64("seed", 5, "seed of the noises and their offsets")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	leadMs := fs.Int("lead-ms", 2000, "the room before each recording (the energy VAD's floor needs about a second)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	snrs, err := parseSNRs(*snrList)
	if err != nil {
		return err
	}
	if *minutes <= 0 || *minutes > 60 {
		return fmt.Errorf("%w: --noise-minutes %g (want 0..60)", errCommandLine, *minutes)
	}
	names := strings.Split(*noises, ",")
	cfg, err := w.LoadConfig(*cfgPath, "127.0.0.1:0", sets)
	if err != nil {
		return err
	}
	utts, err := roomSpeech()
	if err != nil {
		return err
	}
	if *limit > 0 && len(utts) > *limit {
		utts = utts[:*limit]
	}
	loopSec := 30
	noise, err := makeNoises(ctx, names, loopSec, *seed)
	if err != nil {
		return err
	}
	conds := []roomCond{{}}
	for _, n := range names {
		for _, s := range snrs {
			conds = append(conds, roomCond{n, s})
		}
	}
	var rep roomsReport
	rng := rand.New(rand.NewPCG(*seed, 17))
	for _, det := range roomDetectors {
		vc := w.Pipeline(cfg).VAD
		vc.Detector, vc.SampleRate, vc.FrameMs = det, benchRate, 20
		for _, c := range conds {
			r, err := vadInRoom(vc, c, utts, noise[c.Noise], *leadMs, rng)
			if err != nil {
				return err
			}
			rep.VAD = append(rep.VAD, r)
		}
		for _, n := range names {
			for _, s := range snrs {
				r, err := vadOnNoise(vc, n, noise[n], roomLevel(s), *minutes)
				if err != nil {
					return err
				}
				rep.Noise = append(rep.Noise, r)
			}
		}
	}
	if *live {
		lsnrs, err := parseSNRs(*liveSNRs)
		if err != nil {
			return err
		}
		lconds := []roomCond{{}}
		for _, n := range strings.Split(*liveNoises, ",") {
			if noise[n] == nil {
				return fmt.Errorf("%w: --live-noises %s is not in --noises", errCommandLine, n)
			}
			for _, s := range lsnrs {
				lconds = append(lconds, roomCond{n, s})
			}
		}
		if rep.Live, err = w.roomsLive(ctx, *cfgPath, sets, lconds, utts, noise, *leadMs, *parallel, *seed); err != nil {
			return err
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		return enc.Encode(rep)
	}
	printRooms(stdout, rep)
	return nil
}

// roomMix is one recording in one condition: lead of the room, the
// recording, then the room goes on (tail, looped).
type roomMix struct {
	pcm        []int16
	onset, end int // speech, in pcm
	tail       []int16
}

// mixRoom mixes u into noise at c's SNR (its active level over the noise's
// RMS), from a random point of the noise loop.
func mixRoom(u roomUtt, c roomCond, noise []float64, leadMs int, rng *rand.Rand) roomMix {
	lead := leadMs * benchRate / 1000
	pcm := append(make([]int16, lead), u.pcm...)
	m := roomMix{onset: lead + u.onset, end: lead + u.end}
	if c.Noise == "" {
		// The recording's own room, at its quietest level, goes on around
		// it: a quieter lead would make the room noise a step the energy
		// VAD takes for speech.
		room := rand.New(rand.NewPCG(uint64(len(u.pcm)), 3))
		for i := range lead {
			pcm[i] = int16(room.NormFloat64() * u.quietRMS)
		}
		m.pcm = pcm
		return m
	}
	shift := rng.IntN(len(noise))
	rotated := append(append([]float64{}, noise[shift:]...), noise[:shift]...)
	gain := math.Pow(10, (audiotest.SpeechLevel(u.pcm)-c.SNR)/20) * 32768
	m.pcm = audiotest.Mix(pcm, rotated, c.SNR) // the lead's silent frames do not count in its level
	m.tail = make([]int16, len(rotated))
	for i := range m.tail {
		k := (len(pcm) + i) % len(rotated)
		m.tail[i] = int16(max(-32768, min(32767, math.Round(gain*rotated[k]))))
	}
	return m
}

// earlyMs: a start whose trigger run began more than this before the
// onset (speechOnset) was the noise's; closer, it is a soft onset the
// estimate missed.
const earlyMs = 300

// vadInRoom runs the VAD over every recording mixed into c and measures
// where it starts and ends.
func vadInRoom(vc audio.VADConfig, c roomCond, utts []roomUtt, noise []float64, leadMs int, rng *rand.Rand) (vadRoom, error) {
	r := vadRoom{Cond: c, Detector: vc.Detector, Utts: len(utts)}
	v, err := audio.NewVAD(vc)
	if err != nil {
		return r, err
	}
	const frame = benchRate / 50
	var delays, waits []float64
	for _, u := range utts {
		m := mixRoom(u, c, noise, leadMs, rng)
		v.Reset()
		pcm := m.pcm
		quiet := rand.New(rand.NewPCG(uint64(len(pcm)), 5))
		for len(pcm) < m.end+3*benchRate { // 3 s of the room after the last word
			if m.tail == nil {
				for range frame {
					pcm = append(pcm, int16(quiet.NormFloat64()*u.quietRMS))
				}
				continue
			}
			k := len(pcm) - len(m.pcm)
			pcm = append(pcm, m.tail[k%len(m.tail):min(len(m.tail), k%len(m.tail)+frame)]...)
		}
		found, ended := false, false
		for f := 0; (f+1)*frame <= len(pcm); f++ {
			at := (f + 1) * frame
			switch v.Process(pcm[f*frame : at]) {
			case audio.VADSpeechStart:
				begun := at - (vc.StartMs * benchRate / 1000) // where the triggering run began
				switch {
				case begun < m.onset-earlyMs*benchRate/1000:
					if !found {
						r.EarlyOn++
					}
				case at <= m.end && !found:
					found = true
					delays = append(delays, float64(at-m.onset)*1000/benchRate)
				}
			case audio.VADSpeechEnd:
				if at < m.end {
					if found {
						r.Splits++
					}
				} else if !ended {
					ended = true
					waits = append(waits, float64(at-m.end)*1000/benchRate)
				}
			}
		}
		if found {
			r.Found++
		}
		if !ended {
			r.NoEnd++
		}
	}
	r.StartP50 = percentile(delays, 0.5)
	r.EndWait50, r.EndWait95 = percentile(waits, 0.5), percentile(waits, 0.95)
	return r, nil
}

// vadOnNoise counts the utterances started by minutes of noise at levelDBFS.
func vadOnNoise(vc audio.VADConfig, name string, noise []float64, levelDBFS, minutes float64) (noiseRoom, error) {
	r := noiseRoom{Noise: name, LevelDBFS: levelDBFS, Detector: vc.Detector, Minutes: minutes}
	v, err := audio.NewVAD(vc)
	if err != nil {
		return r, err
	}
	pcm := audiotest.Scale(noise, levelDBFS)
	const frame = benchRate / 50
	total := int(minutes * 60 * benchRate / frame)
	speech := 0
	for f := range total {
		off := (f * frame) % (len(pcm) - frame)
		if v.Process(pcm[off:off+frame]) == audio.VADSpeechStart {
			r.Starts++
			if f*frame >= settleSec*benchRate {
				r.Settled++
			}
		}
		if v.InSpeech() {
			speech++
		}
	}
	r.InSpeech = float64(speech) / float64(max(1, total))
	r.PerMinute = float64(r.Starts) / minutes
	r.SettledMin = float64(r.Settled) / max(1.0/60, minutes-settleSec/60.0)
	return r, nil
}

// roomsLive streams every recording in every condition to two servers, one
// per detector, and measures WER and heard latency.
func (w *Wiring) roomsLive(ctx context.Context, cfgPath string, sets multiFlag, conds []roomCond, utts []roomUtt,
	noise map[string][]float64, leadMs, parallel int, seed uint64,
) ([]liveRoom, error) {
	cfgs := map[string]*config.Config{}
	for _, det := range roomDetectors {
		c, err := w.LoadConfig(cfgPath, "127.0.0.1:0", append(append(multiFlag{}, sets...), "pipeline.vad.detector="+det))
		if err != nil {
			return nil, err
		}
		cfgs[det] = c
	}
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	be, closers, err := w.OpenBackends(cfgs[audio.DetectorEnergy], log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.CloseAll(closers) }()
	urls := map[string]string{}
	for k, det := range roomDetectors {
		url, stop, err := w.benchServer(cfgs[det], be, "127.0.0.1:0", log) //nolint:contextcheck // lives until stop()
		if err != nil {
			return nil, err
		}
		defer stop()
		urls[[]string{"semantic", "silence"}[k]] = url // playRound's two slots
	}
	c := cfgs[audio.DetectorEnergy].Pipeline
	maxWait := time.Duration(max(c.Turn.MaxSilenceMs, c.VAD.EndSilenceMs)) * time.Millisecond
	rng := rand.New(rand.NewPCG(seed, 23))
	var out []liveRoom
	for _, cond := range conds {
		items := make([]benchItem, len(utts))
		for i, u := range utts {
			m := mixRoom(u, cond, noise[cond.Noise], leadMs, rng)
			items[i] = benchItem{Name: u.name, Kind: "complete", Text: u.ref, pcm: m.pcm, speechEnd: m.end, tail: m.tail, roomRMS: u.quietRMS}
		}
		fmt.Fprintf(os.Stderr, "bench rooms: live %s: %d recordings, two servers\n", cond, len(items))
		runs := playRound(ctx, items, urls, parallel, false, true, maxWait)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for k, det := range roomDetectors {
			mode := []string{"semantic", "silence"}[k]
			lr := liveRoom{Cond: cond, Detector: det, Utts: len(items)}
			var heard []float64
			var errs, words int
			for i, r := range runs {
				if r.Mode != mode {
					continue
				}
				it := items[i/2]
				if r.Err != "" {
					lr.Errors++
				}
				e, n := asrtest.WER(asrtest.Words(it.Text), asrtest.Words(strings.Join(r.Finals, " ")))
				errs, words = errs+e, words+n
				lr.ExtraTurns += max(0, len(r.Finals)-1)
				if r.HeardMs == nil {
					lr.NoAnswer++
				} else {
					heard = append(heard, *r.HeardMs)
				}
			}
			lr.WER = float64(errs) / float64(max(1, words))
			lr.HeardN = len(heard)
			lr.HeardP50, lr.HeardP95 = percentile(heard, 0.5), percentile(heard, 0.95)
			out = append(out, lr)
		}
	}
	return out, nil
}

func printRooms(w io.Writer, rep roomsReport) {
	fmt.Fprintln(w, "vad (offline, every recording in each room)")
	fmt.Fprintf(w, "  %-14s %-7s %7s %7s %9s %10s %10s %6s %6s\n", "condition", "det", "found", "early", "start50", "endwait50", "endwait95", "noend", "splits")
	for _, r := range rep.VAD {
		fmt.Fprintf(w, "  %-14s %-7s %3d/%-3d %7d %7.0fms %8.0fms %8.0fms %6d %6d\n", r.Cond, r.Detector, r.Found, r.Utts, r.EarlyOn,
			r.StartP50, r.EndWait50, r.EndWait95, r.NoEnd, r.Splits)
	}
	fmt.Fprintln(w, "noise alone: turns started per minute")
	for _, r := range rep.Noise {
		fmt.Fprintf(w, "  %-7s %6.0f dBFS  %-7s %5.1f/min (%d in %.0f min; %d after the first %d s)  in speech %3.0f%% of the time\n", r.Noise, r.LevelDBFS, r.Detector,
			r.PerMinute, r.Starts, r.Minutes, r.Settled, settleSec, 100*r.InSpeech)
	}
	if len(rep.Live) > 0 {
		fmt.Fprintln(w, "live (two servers, real time)")
		fmt.Fprintf(w, "  %-14s %-7s %6s %9s %9s %8s %6s %6s\n", "condition", "det", "WER", "heard50", "heard95", "answered", "extra", "errors")
		for _, r := range rep.Live {
			fmt.Fprintf(w, "  %-14s %-7s %5.1f%% %7.0fms %7.0fms %4d/%-3d %6d %6d\n", r.Cond, r.Detector, 100*r.WER, r.HeardP50, r.HeardP95,
				r.HeardN, r.Utts, r.ExtraTurns, r.Errors)
		}
	}
}
