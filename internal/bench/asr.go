package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/asr/asrtest"
	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// benchUtt is one recording with its reference.
type benchUtt struct {
	id, path, ref string
}

// benchSet is a folder of recordings (or a TSV's set column).
type benchSet struct {
	name    string
	heldOut bool
	utts    []benchUtt
}

// SetResult is what one set measured.
type SetResult struct {
	Set        string  `json:"set"`
	HeldOut    bool    `json:"held_out"`
	Utterances int     `json:"utterances"`
	Turns      int     `json:"turns"` // VAD endpoints, i.e. asr streams
	Words      int     `json:"words"`
	Errors     int     `json:"errors"`
	WER        float64 `json:"wer"`
	FinalP50Ms float64 `json:"final_p50_ms"`
	FinalP95Ms float64 `json:"final_p95_ms"`
	// The same on the decoding thread's CPU clock: what the latency is on
	// a free core (the wall figures grow with the machine's load).
	FinalCPUP50Ms float64 `json:"final_cpu_p50_ms"`
	FinalCPUP95Ms float64 `json:"final_cpu_p95_ms"`
	// The same on the process's CPU clock: includes work other threads do
	// for the final (n-best rescoring runs on its engine's thread).
	FinalProcCPUP50Ms float64   `json:"final_proc_cpu_p50_ms"`
	FinalProcCPUP95Ms float64   `json:"final_proc_cpu_p95_ms"`
	CPUPerAudioS      float64   `json:"cpu_per_audio_s"`
	AudioS            float64   `json:"audio_s"`
	finals            []float64 // ms
	finalsCPU         []float64 // ms
	finalsProc        []float64 // ms
	cpu               float64
	rescored          []rescoredUtt
}

// rescoredUtt is one recording's turns as n-best rescoring saw them, so
// that other weights can be tried on the same lists (--rescore-grid).
type rescoredUtt struct {
	ref   []string
	turns []asrsphinx.Rescored // FirstPass only when the turn was not rescored
}

func (w *Wiring) runBenchASR(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench asr", flag.ContinueOnError)
	cfgPath := fs.String("config", w.DefaultConfig, "YAML config (its asr and pipeline.vad sections are used)")
	var sets multiFlag
	fs.Var(&sets, "set", "override a config key, key=value (repeatable)")
	dir := fs.String("dir", "", "folder of ID.wav + ID.txt, or of such folders (one set each; heldout-* are held out)")
	tsv := fs.String("tsv", "", "TSV: wav path, reference, optional set name (heldout-* held out)")
	rate := fs.Int("rate", 0, "resample every file to this rate first, as a client at that rate would send it (8000, 44100, 48000); 0 = as recorded")
	only := fs.String("only", "", "comma-separated set names to run (default all)")
	fresh := fs.Bool("fresh", false, "a new recogniser for every recording: measures a fresh decoder's first utterance")
	noSession := fs.Bool("no-session", false, "start utterances on the Recognizer itself, not a per-recording asr.Session")
	jsonOut := fs.Bool("json", false, "print JSON")
	hyps := fs.Bool("hyp", false, "print every hypothesis next to its reference")
	cmnOut := fs.Bool("cmn", false, "print the mean cepstrum the tuning recordings ended with (for asr.sphinx.cmninit)")
	pausesOut := fs.String("pauses", "", "write the end-of-turn decisions of real speech to this file, for bench eou --file:\n"+
		"the partial at every pause inside a recording (0, with the pause's length) and at its end (1);\n"+
		"the VAD's end silence is raised to 5 s so that pauses stay inside the utterance")
	grid := fs.String("rescore-grid", "", "with asr.sphinx.rescore.model set: WER of every weight and word bonus on the same n-best lists, \"W,W,...;B,B,...\"")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if (*dir == "") == (*tsv == "") {
		return fmt.Errorf("%w: bench asr: give --dir or --tsv", errCommandLine)
	}
	if *rate != 0 && !audio.ValidResampleRate(*rate) {
		return fmt.Errorf("%w: bench asr: --rate %d is not a rate the pipeline takes", errCommandLine, *rate)
	}
	cfg, err := w.LoadConfig(*cfgPath, "", sets)
	if err != nil {
		return err
	}
	var all []benchSet
	if *dir != "" {
		all, err = loadSetDir(*dir)
	} else {
		all, err = loadSetTSV(*tsv)
	}
	if err != nil {
		return err
	}
	if *only != "" {
		keep := map[string]bool{}
		for _, n := range strings.Split(*only, ",") {
			keep[strings.TrimSpace(n)] = true
		}
		var sel []benchSet
		for _, s := range all {
			if keep[s.name] {
				sel = append(sel, s)
			}
		}
		all = sel
	}
	if len(all) == 0 {
		return fmt.Errorf("bench asr: %w", errNoSets)
	}
	var weights, bonuses []float64
	if *grid != "" {
		if cfg.ASR.Sphinx.Rescore.Model == "" {
			return fmt.Errorf("%w: bench asr: --rescore-grid needs asr.sphinx.rescore.model", errCommandLine)
		}
		if weights, bonuses, err = parseGrid(*grid); err != nil {
			return err
		}
	}
	vcfg := w.Pipeline(cfg).VAD
	vcfg.SampleRate, vcfg.FrameMs = 16000, 20

	b := &asrBench{backends: w.ASRBackends, cfg: cfg, vad: vcfg, rate: *rate, session: !*noSession, hyps: *hyps, out: stdout}
	if *pausesOut != "" {
		f, err := os.Create(*pausesOut)
		if err != nil {
			return fmt.Errorf("bench asr: --pauses: %w", err)
		}
		defer f.Close()
		fmt.Fprintf(f, "# voxpipe bench asr --pauses: the recogniser's partial at every pause of real speech.\n"+
			"# label TAB partial TAB pause ms (0 = the speaker went on after that pause, 1 = the recording ended; - = none)\n"+
			"# TAB the intonation before it: end pitch in the speaker's range (- = not known yet), slope st/s, voiced frames\n")
		b.pauses = f
		b.vad.EndSilenceMs = pauseEndSilenceMs
		b.voices = pipeline.NewSpeakerMemory(0, cfg.Pipeline.Turn.RememberVoices, cfg.Pipeline.Turn.RememberFor)
	}
	if cfg.ASR.Sphinx.Rescore.Model != "" {
		w.ObserveRescore(func(r asrsphinx.Rescored) { b.lastRescored = &r })
		defer w.ObserveRescore(nil)
	}
	if !*fresh {
		if err := b.open(ctx); err != nil {
			return err
		}
		defer b.close()
	}
	var results []*SetResult
	var cmnSum []float64
	cmnN := 0
	for _, s := range all {
		res := &SetResult{Set: s.name, HeldOut: s.heldOut}
		for _, u := range s.utts {
			if *fresh {
				if err := b.open(ctx); err != nil {
					return err
				}
			}
			mean, err := b.decode(ctx, u, res)
			if *fresh {
				b.close()
			}
			if err != nil {
				return fmt.Errorf("%s: %w", u.path, err)
			}
			if !s.heldOut && len(mean) > 0 {
				if cmnSum == nil {
					cmnSum = make([]float64, len(mean))
				}
				for i, v := range mean {
					cmnSum[i] += float64(v)
				}
				cmnN++
			}
		}
		res.finish()
		results = append(results, res)
		if !*jsonOut {
			fmt.Fprintln(os.Stderr, res.line())
		}
	}
	groups := []*SetResult{sumResults("TUNING (all)", false, results), sumResults("HELD-OUT (all)", true, results)}
	if *jsonOut {
		out := map[string]any{"sets": results, "tuning": groups[0], "held_out": groups[1]}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "%-22s %5s %5s %6s %7s %9s %9s %9s %9s %8s %9s\n", "set", "utts", "turns", "words", "WER",
		"final p50", "final p95", "cpu p50", "cpu p95", "CPU/s", "proc p50")
	for _, r := range append(results, groups...) {
		if r.Utterances > 0 {
			fmt.Fprintln(stdout, r.line())
		}
	}
	if len(weights) > 0 {
		printRescoreGrid(stdout, results, weights, bonuses)
	}
	if *cmnOut && cmnN > 0 {
		parts := make([]string, len(cmnSum))
		for i, v := range cmnSum {
			parts[i] = fmt.Sprintf("%.2f", v/float64(cmnN))
		}
		fmt.Fprintf(stdout, "cmninit (mean over %d tuning recordings): %s\n", cmnN, strings.Join(parts, ","))
	}
	return nil
}

// asrBench decodes recordings the way a session does (see decode).
type asrBench struct {
	backends map[string]func(*config.Config) (asr.Recognizer, io.Closer, error)
	cfg      *config.Config
	vad      audio.VADConfig
	rate     int
	session  bool
	hyps     bool
	out      io.Writer

	rec    asr.Recognizer
	closer io.Closer

	lastRescored *asrsphinx.Rescored // set by the recogniser's rescoring during Close

	pauses io.Writer // --pauses: the end-of-turn decision points (see pauseTracker)
	// voices: the voices heard in earlier recordings, which a recording
	// may borrow its register's range from (pipeline.turn.remember_voices),
	// as the server's sessions do; nil = every recording alone.
	voices *pipeline.SpeakerMemory
}

// pauseEndSilenceMs is the VAD's end silence with --pauses: long enough that
// the pauses people make inside a turn stay inside one utterance.
const pauseEndSilenceMs = 5000

// pauseTracker records where an end-of-turn detector has to decide: the
// latest partial when a pause reaches pauseMinFrames of silence, labelled 0
// with the pause's length when speech resumes, 1 when the recording ends.
type pauseTracker struct {
	w        io.Writer
	partial  string // the latest partial
	atPause  string // the partial when the current pause began
	silence  int    // frames of the current pause
	snapshot bool
	// The intonation before each pause, as audio-in follows it
	// (pipeline.turn.intonation_*): the contour when the pause began.
	into    *audio.Intonation
	contour audio.Contour
	voices  *pipeline.SpeakerMemory
}

// newPauseTracker follows one speaker (a recording), starting from the
// voices heard before it, if any.
func newPauseTracker(w io.Writer, voices *pipeline.SpeakerMemory) *pauseTracker {
	into, err := audio.NewIntonation(16000, 16000*20/1000)
	if err != nil {
		panic(err) // 20 ms frames at 16 kHz always fit
	}
	into.RecallRegister(voices.Voices())
	return &pauseTracker{w: w, into: into, voices: voices}
}

// done leaves the recording's voice to the ones after it.
func (t *pauseTracker) done() {
	if t != nil {
		t.voices.Remember("", t.into.Profile())
	}
}

// speech follows the pitch of the frames the VAD calls speech.
func (t *pauseTracker) speech(frame []int16, silentFrames int) {
	if t == nil {
		return
	}
	if c, ended := t.into.Listen(frame, silentFrames); ended {
		t.contour = c
	}
}

// fmtContour is the intonation columns of a row: the ending's place in the
// speaker's range ("-" when not known yet), its slope and voiced frames.
func fmtContour(c audio.Contour) string {
	if math.IsNaN(c.Range) {
		return fmt.Sprintf("-\t%.1f\t%d", c.Slope, c.Voiced)
	}
	return fmt.Sprintf("%.3f\t%.1f\t%d", c.Range, c.Slope, c.Voiced)
}

// pauseMinFrames (60 ms) is when the pipeline takes a pause to begin (its
// speculative answers start there); shorter gaps are inside words.
const pauseMinFrames = 3

func (t *pauseTracker) frame(silentFrames int) {
	if t == nil {
		return
	}
	if silentFrames >= pauseMinFrames && !t.snapshot {
		t.atPause, t.snapshot = t.partial, true
	}
	if silentFrames == 0 && t.snapshot {
		if text := strings.TrimSpace(t.atPause); text != "" {
			fmt.Fprintf(t.w, "0\t%s\t%d\t%s\n", text, t.silence*20, fmtContour(t.contour))
		}
		t.snapshot = false
	}
	t.silence = silentFrames
}

// end records the utterance's end: the partial its last pause began with.
func (t *pauseTracker) end() {
	if t == nil {
		return
	}
	text := t.partial
	if t.snapshot {
		text = t.atPause
	}
	if text = strings.TrimSpace(text); text != "" {
		c := t.contour
		if !t.snapshot {
			c = t.into.Ending() // the recording ended in speech
		}
		fmt.Fprintf(t.w, "1\t%s\t-\t%s\n", text, fmtContour(c))
	}
	t.partial, t.atPause, t.silence, t.snapshot = "", "", 0, false
}

func (b *asrBench) open(ctx context.Context) error {
	mk, ok := b.backends[b.cfg.ASR.Backend]
	if !ok {
		return fmt.Errorf("bench asr: unknown asr.backend %q", b.cfg.ASR.Backend)
	}
	rec, cl, err := mk(b.cfg)
	if err != nil {
		return err
	}
	b.rec, b.closer = rec, cl
	// Let a background pool fill finish so it is not counted as decoding.
	if w, ok := rec.(interface{ WaitReady(context.Context) error }); ok {
		_ = w.WaitReady(ctx)
	}
	return nil
}

func (b *asrBench) close() {
	if b.closer != nil {
		_ = b.closer.Close()
	}
	b.rec, b.closer = nil, nil
}

// decode streams one recording through the pipeline's audio-in chain as
// pipeline/audioin.go runs it: resample to 16 kHz, 20 ms frames, the VAD;
// at speech start the VAD's pre-roll opens an asr stream, frames in speech
// are written to it, and at the VAD's end of speech the stream is closed and
// its final awaited (that wait is the "final" latency: what the turn waits
// for after the endpoint). Every turn's final counts, joined, against the
// reference, as a client counts every turn of a session. The recording is
// followed by 1 s of near-silence so that its last turn ends. It returns the
// session's cepstral mean when the backend exposes one.
func (b *asrBench) decode(ctx context.Context, u benchUtt, res *SetResult) ([]float32, error) {
	wav, err := readWAV(u.path)
	if err != nil {
		return nil, err
	}
	pcm, inRate := wav.Mono(), wav.SampleRate
	if b.rate != 0 && b.rate != inRate {
		rs, err := audio.NewResampler(inRate, b.rate)
		if err != nil {
			return nil, err
		}
		// Flush returns in its own dst[:0]: it must not be given the
		// output of Process, which it would overwrite (--rate gave a few
		// samples of audio and no turn at all).
		out := rs.Process(nil, pcm)
		pcm = append(out, rs.Flush(nil)...)
		inRate = b.rate
	}
	rec := b.rec
	var sess asr.Session
	if s, ok := rec.(asr.Sessioner); ok && b.session {
		sess = s.NewSession(asr.SessionOptions{InputRate: inRate})
		defer sess.Close()
		rec = sess
	}
	// 1 s of ±2 LSB noise: the speaker has stopped.
	tail := make([]int16, inRate)
	seed := uint32(7)
	for i := range tail {
		seed = seed*1664525 + 1013904223
		tail[i] = int16(seed>>30) - 2
	}
	pcm = append(append([]int16(nil), pcm...), tail...)
	res.AudioS += float64(len(pcm)) / float64(inRate)

	var rs *audio.Resampler
	if inRate != 16000 {
		if rs, err = audio.NewResampler(inRate, 16000); err != nil {
			return nil, err
		}
	}
	vad, err := audio.NewVAD(b.vad)
	if err != nil {
		return nil, err
	}
	framer := audio.NewFramer(16000 * 20 / 1000)
	var (
		st      asr.Stream
		finals  []string
		failure error
		turns   []asrsphinx.Rescored
	)
	var pt *pauseTracker
	if b.pauses != nil {
		pt = newPauseTracker(b.pauses, b.voices) // a speaker per recording
	}
	drain := func() {
		for {
			select {
			case r, ok := <-st.Results():
				if !ok {
					return
				}
				if pt != nil && !r.Final {
					pt.partial = r.Text
				}
			default:
				return
			}
		}
	}
	end := func() {
		if st == nil {
			return
		}
		pt.end()
		b.lastRescored = nil
		t0, c0, p0 := time.Now(), benchThreadCPU(), cpuSeconds()
		if err := st.Close(); err != nil && failure == nil {
			failure = err
		}
		for r := range st.Results() {
			if r.Final {
				res.finals = append(res.finals, float64(time.Since(t0))/float64(time.Millisecond))
				res.finalsCPU = append(res.finalsCPU, float64(benchThreadCPU()-c0)/float64(time.Millisecond))
				res.finalsProc = append(res.finalsProc, (cpuSeconds()-p0)*1000)
				if t := strings.TrimSpace(r.Text); t != "" {
					finals = append(finals, t)
				}
				if b.lastRescored != nil {
					turns = append(turns, *b.lastRescored)
				} else {
					turns = append(turns, asrsphinx.Rescored{FirstPass: r.Text, Chosen: -1})
				}
			}
		}
		res.Turns++
		st = nil
	}
	emit := func(frame []int16) {
		if failure != nil {
			return
		}
		switch vad.Process(frame) {
		case audio.VADSpeechStart:
			end()
			s, err := rec.Start(ctx, 16000)
			if err != nil {
				failure = err
				return
			}
			st = s
			if err := st.Write(vad.PreRoll(nil)); err != nil {
				failure = err
			}
			drain()
		case audio.VADSpeechEnd:
			end()
		default:
			if st == nil || !vad.InSpeech() {
				return
			}
			if err := st.Write(frame); err != nil {
				failure = err
			}
			drain()
			pt.speech(frame, vad.SilenceFrames())
			pt.frame(vad.SilenceFrames())
		}
	}
	// One OS thread for the whole recording, so that its CPU clock is the
	// decoding's (sphinx decodes on the caller's thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := cpuSeconds()
	chunk := inRate / 50
	var buf []int16
	for off := 0; off < len(pcm) && failure == nil; off += chunk {
		in := pcm[off:min(off+chunk, len(pcm))]
		if rs != nil {
			buf = rs.Process(buf[:0], in)
			in = buf
		}
		framer.Write(in, emit)
	}
	end()
	pt.done()
	res.cpu += cpuSeconds() - cpu0
	if failure != nil {
		return nil, failure
	}
	hyp := strings.Join(finals, " ")
	ref := asrtest.Words(u.ref)
	e, n := asrtest.WER(ref, asrtest.Words(hyp))
	res.Utterances++
	res.Words += n
	res.Errors += e
	res.rescored = append(res.rescored, rescoredUtt{ref: ref, turns: turns})
	if b.hyps {
		fmt.Fprintf(b.out, "%s/%s\terrors %d/%d\n\tref: %s\n\thyp: %s\n", res.Set, u.id, e, n, strings.Join(ref, " "), hyp)
	}
	if m, ok := sess.(interface{ CMN() []float32 }); ok {
		return m.CMN(), nil
	}
	return nil, nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// benchThreadCPU is the calling thread's CPU time.
func benchThreadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *SetResult) finish() {
	if r.Words > 0 {
		r.WER = float64(r.Errors) / float64(r.Words)
	}
	if r.AudioS > 0 {
		r.CPUPerAudioS = r.cpu / r.AudioS
	}
	sort.Float64s(r.finals)
	r.FinalP50Ms = pctSorted(r.finals, 0.50)
	r.FinalP95Ms = pctSorted(r.finals, 0.95)
	sort.Float64s(r.finalsCPU)
	r.FinalCPUP50Ms = pctSorted(r.finalsCPU, 0.50)
	r.FinalCPUP95Ms = pctSorted(r.finalsCPU, 0.95)
	sort.Float64s(r.finalsProc)
	r.FinalProcCPUP50Ms = pctSorted(r.finalsProc, 0.50)
	r.FinalProcCPUP95Ms = pctSorted(r.finalsProc, 0.95)
}

// pctSorted is the p quantile of an ascending slice (0 when empty).
func pctSorted(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func sumResults(name string, heldOut bool, rs []*SetResult) *SetResult {
	t := &SetResult{Set: name, HeldOut: heldOut}
	for _, r := range rs {
		if r.HeldOut != heldOut {
			continue
		}
		t.Utterances += r.Utterances
		t.Turns += r.Turns
		t.Words += r.Words
		t.Errors += r.Errors
		t.AudioS += r.AudioS
		t.cpu += r.cpu
		t.finals = append(t.finals, r.finals...)
		t.finalsCPU = append(t.finalsCPU, r.finalsCPU...)
		t.finalsProc = append(t.finalsProc, r.finalsProc...)
	}
	t.finish()
	return t
}

func (r *SetResult) line() string {
	return fmt.Sprintf("%-22s %5d %5d %6d %6.1f%% %6.0f ms %6.0f ms %6.0f ms %6.0f ms %8.3f %6.0f ms", r.Set, r.Utterances, r.Turns, r.Words,
		100*r.WER, r.FinalP50Ms, r.FinalP95Ms, r.FinalCPUP50Ms, r.FinalCPUP95Ms, r.CPUPerAudioS, r.FinalProcCPUP50Ms)
}

// loadSetDir reads D/ID.wav + D/ID.txt as one set, or every sub-folder of
// D holding such pairs as a set of its own.
func loadSetDir(dir string) ([]benchSet, error) {
	own, err := readSetFolder(dir, filepath.Base(filepath.Clean(dir)))
	if err != nil {
		return nil, err
	}
	if len(own.utts) > 0 {
		return []benchSet{own}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var sets []benchSet
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s, err := readSetFolder(filepath.Join(dir, e.Name()), e.Name())
		if err != nil {
			return nil, err
		}
		if len(s.utts) > 0 {
			sets = append(sets, s)
		}
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("bench asr: %s: %w (want ID.wav + ID.txt; make asr-sets writes build/asrsets)", dir, errNoSets)
	}
	return sets, nil
}

func readSetFolder(dir, name string) (benchSet, error) {
	s := benchSet{name: name, heldOut: strings.HasPrefix(name, heldOutPrefix)}
	wavs, err := filepath.Glob(filepath.Join(dir, "*.wav"))
	if err != nil {
		return s, err
	}
	sort.Strings(wavs)
	for _, w := range wavs {
		id := strings.TrimSuffix(filepath.Base(w), ".wav")
		ref, err := os.ReadFile(strings.TrimSuffix(w, ".wav") + ".txt")
		if err != nil {
			continue // a WAV without a reference is not part of the set
		}
		s.utts = append(s.utts, benchUtt{id: id, path: w, ref: strings.TrimSpace(string(ref))})
	}
	return s, nil
}

// loadSetTSV reads "wav<TAB>reference[<TAB>set]" lines; relative paths are
// relative to the TSV's folder.
func loadSetTSV(path string) ([]benchSet, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	byName := map[string]*benchSet{}
	var order []string
	for i, l := range lines {
		if strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) < 2 {
			return nil, fmt.Errorf("%s:%d: want wav<TAB>reference[<TAB>set]", path, i+1)
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if len(f) > 2 && strings.TrimSpace(f[2]) != "" {
			name = strings.TrimSpace(f[2])
		}
		s := byName[name]
		if s == nil {
			s = &benchSet{name: name, heldOut: strings.HasPrefix(name, heldOutPrefix)}
			byName[name] = s
			order = append(order, name)
		}
		wav := f[0]
		if !filepath.IsAbs(wav) {
			wav = filepath.Join(filepath.Dir(path), wav)
		}
		s.utts = append(s.utts, benchUtt{id: strings.TrimSuffix(filepath.Base(wav), ".wav"), path: wav, ref: f[1]})
	}
	sets := make([]benchSet, 0, len(order))
	for _, n := range order {
		sets = append(sets, *byName[n])
	}
	return sets, nil
}

// parseGrid reads "W,W,...;B,B,..." (the bonus list may be left out: 0).
func parseGrid(s string) (weights, bonuses []float64, err error) {
	ws, bs, _ := strings.Cut(s, ";")
	if bs == "" {
		bs = "0"
	}
	for i, part := range []string{ws, bs} {
		for _, f := range strings.Split(part, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: bench asr: --rescore-grid %q: %q is not a number", errCommandLine, s, f)
			}
			if i == 0 {
				weights = append(weights, v)
			} else {
				bonuses = append(bonuses, v)
			}
		}
	}
	return weights, bonuses, nil
}

// printRescoreGrid re-picks every rescored turn's final under each weight
// and bonus and prints tuning and held-out WER, with the first pass's (no
// rescoring) and the n-best lists' oracle (the best candidate per turn,
// chosen knowing the reference: what any rescoring could reach).
func printRescoreGrid(w io.Writer, results []*SetResult, weights, bonuses []float64) {
	wer := func(heldOut bool, pick func(asrsphinx.Rescored) string) float64 {
		e, n := 0, 0
		for _, r := range results {
			if r.HeldOut != heldOut {
				continue
			}
			for _, u := range r.rescored {
				var words []string
				for _, t := range u.turns {
					words = append(words, asrtest.Words(pick(t))...)
				}
				de, dn := asrtest.WER(u.ref, words)
				e, n = e+de, n+dn
			}
		}
		if n == 0 {
			return 0
		}
		return 100 * float64(e) / float64(n)
	}
	first := func(t asrsphinx.Rescored) string { return t.FirstPass }
	var took, astar []float64
	cands := 0
	for _, r := range results {
		for _, u := range r.rescored {
			for _, t := range u.turns {
				if len(t.Candidates) > 0 {
					took = append(took, float64(t.Took)/float64(time.Millisecond))
					astar = append(astar, float64(t.NBestTook)/float64(time.Millisecond))
					cands += len(t.Candidates)
				}
			}
		}
	}
	sort.Float64s(took)
	sort.Float64s(astar)
	fmt.Fprintf(w, "rescoring: %d turns with an n-best list (%.1f candidates each), n-best + scoring wall p50 %.1f ms, p95 %.1f ms (the A* search alone %.1f / %.1f ms)\n",
		len(took), float64(cands)/float64(max(1, len(took))), pctSorted(took, 0.5), pctSorted(took, 0.95), pctSorted(astar, 0.5), pctSorted(astar, 0.95))
	fmt.Fprintf(w, "%-28s %8s %8s\n", "final", "tuning", "held-out")
	fmt.Fprintf(w, "%-28s %7.1f%% %7.1f%%\n", "first pass (no rescoring)", wer(false, first), wer(true, first))
	for _, wt := range weights {
		for _, bo := range bonuses {
			pick := func(t asrsphinx.Rescored) string {
				if t.Err != nil || len(t.Candidates) == 0 {
					return t.FirstPass
				}
				return t.Candidates[t.Pick(wt, bo)].Text
			}
			fmt.Fprintf(w, "%-28s %7.1f%% %7.1f%%\n", fmt.Sprintf("weight %g bonus %g", wt, bo), wer(false, pick), wer(true, pick))
		}
	}
	for _, heldOut := range []bool{false, true} {
		e, n := 0, 0
		for _, r := range results {
			if r.HeldOut != heldOut {
				continue
			}
			for _, u := range r.rescored {
				// Per turn, the candidate closest to the whole reference
				// (turns are short; a good lower bound, not exact).
				var words []string
				for _, t := range u.turns {
					best, bestE := t.FirstPass, -1
					for _, c := range append([]asrsphinx.Candidate{{Text: t.FirstPass}}, t.Candidates...) {
						ce, _ := asrtest.WER(u.ref, append(append([]string(nil), words...), asrtest.Words(c.Text)...))
						if bestE < 0 || ce < bestE {
							best, bestE = c.Text, ce
						}
					}
					words = append(words, asrtest.Words(best)...)
				}
				de, dn := asrtest.WER(u.ref, words)
				e, n = e+de, n+dn
			}
		}
		if n > 0 {
			fmt.Fprintf(w, "oracle (best of the list, %s): %.1f%%\n", map[bool]string{false: "tuning", true: "held-out"}[heldOut], 100*float64(e)/float64(n))
		}
	}
}
