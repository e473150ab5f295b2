//go:build cgo

package pipeline

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// echoPath is a simulated loudspeaker-to-microphone path: the device's
// playout and the network (delay), a room (an impulse response: the direct
// sound, early reflections, a reverberant tail) and the level of the echo
// against what was played (-6 dB: a loud speaker beside its microphone).
type echoPath struct {
	delay int       // samples
	ir    []float64 // ir[0] is the direct path
	hist  []float64 // the last delay+len(ir) samples played, a ring
	n     int       // samples played so far
}

// newEchoPath makes a path of delayMs at levelDB with a fixed-seed room
// impulse response: reflections over 2-25 ms, a tail decaying 60 dB in
// 300 ms, cut at 60 ms, 16 kHz.
func newEchoPath(delayMs int, levelDB float64, seed uint64) *echoPath {
	rng := rand.New(rand.NewPCG(seed, 7))
	ir := make([]float64, asrRate*60/1000)
	ir[0] = 1
	for range 12 {
		k := asrRate*2/1000 + rng.IntN(asrRate*23/1000)
		ir[k] += (rng.Float64()*0.4 + 0.1) * float64(1-2*rng.IntN(2))
	}
	rt60 := 0.3 * asrRate
	for k := asrRate * 10 / 1000; k < len(ir); k++ {
		ir[k] += 0.05 * rng.NormFloat64() * math.Pow(10, -3*float64(k)/rt60)
	}
	g := math.Pow(10, levelDB/20)
	for k := range ir {
		ir[k] *= g
	}
	d := asrRate * delayMs / 1000
	return &echoPath{delay: d, ir: ir, hist: make([]float64, d+len(ir))}
}

// add adds to mic the echo of played (16 kHz, the same length).
func (e *echoPath) add(played []int16, mic []float64) {
	size := len(e.hist)
	for i, s := range played {
		e.hist[e.n%size] = float64(s)
		var v float64
		for k, h := range e.ir {
			if back := e.delay + k; back <= e.n {
				v += h * e.hist[(e.n-back)%size]
			}
		}
		mic[i] += v
		e.n++
	}
}

// echoDevice is a speaker without echo cancellation of its own: it plays
// the session's audio in real time (a 20 ms clock), its microphone picks up
// that audio through an echoPath plus room noise plus whatever the person
// says, and it sends the microphone's frames up.
type echoDevice struct {
	t     *testing.T
	path  *echoPath
	rs    *audio.Resampler // OutputRate → 16 kHz, for the room
	noise *rand.Rand
	queue [][]int16 // frames received, not played yet
	say   []int16   // near-end speech still to be spoken
	// What happened, in the bubble's time.
	traces   map[int]bool
	speechAt time.Time // when the last near-end speech began
}

// echoTrial is one run: answers answers at the echo level, with a barge-in
// during each answer when bargeIn is set.
type echoTrial struct {
	mode     EchoMode
	answers  int
	levelDB  float64
	delayMs  int
	bargeIn  bool
	question []int16 // near-end speech that asks
	stop     []int16 // near-end speech that interrupts
	room     uint64  // the impulse response's seed (0: 1)
}

type echoOutcome struct {
	turns, interrupted int
	bargeLatency       []time.Duration // speech onset → interrupted, per answer barged in on
}

func runEchoTrial(t *testing.T, tr echoTrial, answerText string) echoOutcome {
	var res echoOutcome
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		t.Skipf("flite unavailable: %v", err)
	}
	defer synth.Close()
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.OutputRate = 24000
		cfg.OutputLeadMs = 60
		cfg.Echo = EchoConfig{Mode: tr.mode}
		cfg.DeviceEcho = true
		transcripts := make([]string, 0, 2*tr.answers)
		for i := range 2 * tr.answers {
			transcripts = append(transcripts, "question "+strconv.Itoa(i))
		}
		m := &scriptedLLM{scripts: []llmScript{answer(answerText)}}
		if tr.bargeIn {
			m.scripts = nil
			for range tr.answers {
				m.scripts = append(m.scripts, answer(answerText), answer("Okay."))
			}
		}
		log := zerolog.Nop()
		if os.Getenv("VOXPIPE_ECHO_LOG") != "" && tr.mode != EchoOff {
			log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
		}
		sess, err := NewSession("echo", cfg, Backends{ASR: &fakeASR{transcripts: transcripts, minFrames: 10}, LLM: m, TTS: synth},
			nil, log)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := audio.NewResampler(cfg.OutputRate, asrRate)
		if err != nil {
			t.Fatal(err)
		}
		dev := &echoDevice{t: t, path: newEchoPath(tr.delayMs, tr.levelDB, max(1, tr.room)), rs: rs,
			noise: rand.New(rand.NewPCG(5, 6)), traces: map[int]bool{}}
		in, out := make(chan Input), make(chan Output)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sess.Run(ctx, in, out) }()
		res = dev.run(ctx, tr, in, out)
		cancel()
		<-done
		m.wg.Wait()
	})
	return res
}

// run drives the conversation: ask, let the answer play (barging in on it
// when the trial says), and go on to the next question once the turn's
// trace came.
func (d *echoDevice) run(ctx context.Context, tr echoTrial, in chan<- Input, out <-chan Output) echoOutcome {
	var res echoOutcome
	tick := time.NewTicker(frameDur)
	defer tick.Stop()
	frame := make([]float64, asrRate*frameMs/1000)
	var pending *Input // the microphone frame waiting for the session
	turn, done, answerFrames, idle := 0, 0, 0, 0
	asked, barged := false, false
	deadline := time.Now().Add(time.Duration(tr.answers) * 30 * time.Second)
	for time.Now().Before(deadline) {
		var inCh chan<- Input
		var next Input
		if pending != nil {
			inCh, next = in, *pending
		}
		select {
		case <-ctx.Done():
			return res
		case o := <-out:
			if o.Audio != nil {
				d.queue = append(d.queue, o.Audio)
				continue
			}
			switch o.Event.Type {
			case EventInterrupted:
				res.interrupted++
				if !d.speechAt.IsZero() && o.Event.Turn%2 == 1 {
					res.bargeLatency = append(res.bargeLatency, time.Since(d.speechAt))
					d.speechAt = time.Time{}
				}
				d.queue = d.queue[:0] // the device drops what it held
				next := ClientEvent{Type: ClientInterrupt, Turn: o.Event.Turn, PlayedMs: float64(answerFrames * frameMs)}
				go func() {
					select {
					case in <- Input{Event: &next}:
					case <-ctx.Done():
					}
				}()
			case EventTrace:
				d.traces[o.Event.Turn] = true
				res.turns = max(res.turns, o.Event.Turn)
			}
		case inCh <- next:
			pending = nil
		case <-tick.C:
			// One 20 ms frame of the room: what plays now, echoed, plus the
			// room's noise (-55 dBFS) and the person.
			played := make([]int16, 0, len(frame))
			if len(d.queue) > 0 {
				played = d.rs.Process(played, d.queue[0])
				d.queue = d.queue[1:]
				answerFrames++
			} else {
				answerFrames = 0
			}
			for len(played) < len(frame) {
				played = append(played, 0)
			}
			for i := range frame {
				frame[i] = 58 * d.noise.NormFloat64()
			}
			d.path.add(played[:len(frame)], frame)
			if len(d.say) > 0 {
				n := min(len(d.say), len(frame))
				for i := range n {
					frame[i] += float64(d.say[i])
				}
				d.say = d.say[n:]
			}
			mic := make([]int16, len(frame))
			for i, v := range frame {
				mic[i] = int16(max(-32768, min(32767, math.Round(v))))
			}
			pending = &Input{Audio: mic}
			// The script: ask; with barge-ins, interrupt the answer 600 ms
			// in and let the answer to the interruption play out; then
			// ask again.
			want := turn + 1 // the turn whose trace ends this question
			if tr.bargeIn {
				want = turn + 2
			}
			switch {
			case !asked && idle >= 20:
				d.say, asked, barged, idle = tr.question, true, false, 0
			case asked && d.traces[want]:
				turn = want
				if done++; done >= tr.answers {
					return res
				}
				asked, idle = false, 0
			case asked && tr.bargeIn && !barged && answerFrames == 30 && len(d.say) == 0:
				d.say, barged = tr.stop, true
				d.speechAt = time.Now().Add(time.Duration(onset(tr.stop)) * time.Second / asrRate)
			}
			if !asked || len(d.queue) == 0 {
				idle++
			}
		}
	}
	d.t.Errorf("the trial did not finish: %d of %d answers", turn, tr.answers)
	return res
}

// synthPCM speaks text with flite at 16 kHz, scaled to peak at peakDB dBFS.
func synthPCM(t *testing.T, text string, peakDB float64) []int16 {
	t.Helper()
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		t.Skipf("flite unavailable: %v", err)
	}
	defer synth.Close()
	pcm, err := synthAll(synth, text)
	if err != nil {
		t.Fatal(err)
	}
	peak := 1.0
	for _, s := range pcm {
		peak = max(peak, math.Abs(float64(s)))
	}
	g := math.Pow(10, peakDB/20) * 32767 / peak
	for i, s := range pcm {
		pcm[i] = int16(float64(s) * g)
	}
	return pcm
}

// onset is the first sample of pcm over -40 dBFS.
func onset(pcm []int16) int {
	for i, s := range pcm {
		if s > 328 || s < -328 {
			return i
		}
	}
	return len(pcm)
}

// echoTrials is how many answers a trial plays: VOXPIPE_ECHO_TRIALS, or a
// few (fewer in -short or under -race).
func echoTrials(t *testing.T) int {
	if v, err := strconv.Atoi(os.Getenv("VOXPIPE_ECHO_TRIALS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() || raceEnabled {
		// The simulated room is a Go convolution, ten times slower under
		// the race detector.
		return 2
	}
	return 3
}

const echoAnswer = "It is sunny and warm today, with a light breeze from the west."

// TestEchoNoSelfInterruption: a device without echo cancellation plays the
// answers at -6 dB into its microphone, 150 ms late, in a reverberant
// room. With the server's canceller no answer is cut by its own echo;
// without it (the same trial, echo off) the echo cuts them, which is what
// the test would see if the canceller did nothing.
func TestEchoNoSelfInterruption(t *testing.T) {
	n := echoTrials(t)
	question := synthPCM(t, "What is the weather like today?", -6)
	res := runEchoTrial(t, echoTrial{mode: EchoOff, answers: n, levelDB: -6, delayMs: 150, question: question}, echoAnswer)
	t.Logf("echo off: %d answers, %d self-interruptions", res.turns, res.interrupted)
	if res.interrupted == 0 {
		t.Errorf("without the canceller the echo interrupted nothing: the trial cannot tell a canceller from none")
	}
	// The long run (VOXPIPE_ECHO_TRIALS) also tries the ends of the range.
	paths := []struct {
		delayMs int
		levelDB float64
	}{{150, -6}}
	if os.Getenv("VOXPIPE_ECHO_TRIALS") != "" {
		paths = append(paths, struct {
			delayMs int
			levelDB float64
		}{20, -6}, struct {
			delayMs int
			levelDB float64
		}{250, -6}, struct {
			delayMs int
			levelDB float64
		}{250, -20})
	}
	for _, p := range paths {
		res := runEchoTrial(t, echoTrial{mode: EchoAuto, answers: n, levelDB: p.levelDB, delayMs: p.delayMs, question: question}, echoAnswer)
		t.Logf("echo auto, path %d ms at %.0f dB: %d answers, %d self-interruptions", p.delayMs, p.levelDB, res.turns, res.interrupted)
		if res.interrupted != 0 {
			t.Errorf("with the canceller, path %d ms at %.0f dB: %d self-interruptions over %d answers, want 0",
				p.delayMs, p.levelDB, res.interrupted, res.turns)
		}
	}
}

// TestEchoBargeIn: with the canceller on and the echo at -6 dB, the person
// saying "stop talking" (flite, as loud as the answer) 600 ms into the answer cuts
// it every time.
func TestEchoBargeIn(t *testing.T) {
	n := echoTrials(t)
	question := synthPCM(t, "What is the weather like today?", -6)
	stop := synthPCM(t, "Stop talking.", -6)
	res := runEchoTrial(t, echoTrial{mode: EchoAuto, answers: n, levelDB: -6, delayMs: 150, bargeIn: true,
		question: question, stop: stop}, echoAnswer)
	t.Logf("barge-ins: %d answers, %d cut, latencies from speech onset %v", n, res.interrupted, res.bargeLatency)
	if len(res.bargeLatency) < n {
		t.Errorf("%d of %d barge-ins cut the answer", len(res.bargeLatency), n)
	}
	// In the bubble's time, so deterministic: the first answer's gate is
	// stricter (no path estimate yet), the others take ~200 ms more than
	// without echo (the soft onset under the echo is gated).
	for i, l := range res.bargeLatency {
		if limit := 600 * time.Millisecond; (i > 0 && l > limit) || l > 2*limit {
			t.Errorf("barge-in %d took %v from speech onset to the cut, want <= %v", i, l, limit)
		}
	}
}

// synthAll collects a whole synthesis.
func synthAll(synth *ttsflite.Synthesizer, text string) ([]int16, error) {
	ch := make(chan tts.Chunk, 16)
	errc := make(chan error, 1)
	go func() { errc <- synth.Synthesize(context.Background(), text, ch); close(ch) }()
	var pcm []int16
	for c := range ch {
		pcm = append(pcm, c.PCM...)
	}
	return pcm, <-errc
}

// TestMicCleanerFindsThePath: real speech (two librivox sentences) echoed
// 150 ms late through a room at -6 dB: the cleaner finds the delay from
// the envelopes and, canceller and gate together, leaves the echo at least
// 25 dB down after the first second.
func TestMicCleanerFindsThePath(t *testing.T) {
	var far []int16
	for _, id := range []string{"0870", "0880"} {
		raw, err := os.ReadFile(filepath.Join(sphinxTestData, "librivox", "sense_and_sensibility_01_austen_64kb-"+id+".wav"))
		if err != nil || len(raw) < 44 {
			t.Skipf("requires pocketsphinx-testdata (apt-get install pocketsphinx-testdata): %v", err)
		}
		for i := 44; i+1 < len(raw); i += 2 {
			far = append(far, int16(binary.LittleEndian.Uint16(raw[i:])))
		}
	}
	cfg, err := testConfig().checkRoom()
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Now()
	ref := newEchoRef(epoch)
	cl, err := newMicCleaner(cfg, ref, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	path := newEchoPath(150, -6, 1)
	noise := rand.New(rand.NewPCG(8, 9))
	n := asrRate * frameMs / 1000
	var in, out float64
	for f := 0; f+n <= len(far); f += n {
		at := epoch.Add(time.Duration(f) * time.Second / asrRate)
		ref.write(far[f:f+n], at)
		mic := make([]float64, n)
		for i := range mic {
			mic[i] = 58 * noise.NormFloat64()
		}
		path.add(far[f:f+n], mic)
		m := make([]int16, n)
		for i, v := range mic {
			m[i] = int16(max(-32768, min(32767, math.Round(v))))
		}
		o := cl.clean(m, at.Add(frameDur))
		if f >= asrRate {
			in += frameEnergy(m)
			out += frameEnergy(o)
		}
	}
	erle := 10 * math.Log10(in/out)
	t.Logf("delay found %d ms, gain %.1f dB; echo taken off after the first second: %.1f dB", cl.delay.lag*frameMs, cl.delay.gainDB(), erle)
	if lag := cl.delay.lag * frameMs; lag < 140 || lag > 180 {
		t.Errorf("delay estimate %d ms, want 150 (±20)", lag)
	}
	if erle < 25 {
		t.Errorf("echo reduced by %.1f dB, want >= 25 (the room's noise is 33 dB under the echo)", erle)
	}
}

// BenchmarkEchoRef: what echo cancellation adds per 20 ms frame: the
// pacer's write (resampling 24 kHz to 16 kHz, under the lock), audio-in's
// two reads, and the whole cleaner (delay estimate, canceller, gate)
// against the speexdsp canceller alone on the same frames.
func BenchmarkEchoRef(b *testing.B) {
	epoch := time.Now()
	frame24 := make([]int16, 24000*frameMs/1000)
	frame := make([]int16, asrRate*frameMs/1000)
	for i := range frame {
		frame[i] = int16(3000 * math.Sin(float64(i)/7))
	}
	b.Run("write", func(b *testing.B) {
		ref := newEchoRef(epoch)
		tap, err := newEchoTap(ref, 24000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tap.sent(frame24, epoch.Add(time.Duration(i)*frameDur))
		}
	})
	b.Run("read", func(b *testing.B) {
		ref := newEchoRef(epoch)
		ref.write(make([]int16, echoRing), epoch)
		dst := make([]int16, len(frame))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ref.read(dst, int64(i%90)*int64(len(frame)))
		}
	})
	cfg, err := testConfig().checkRoom()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("clean", func(b *testing.B) {
		ref := newEchoRef(epoch)
		cl, err := newMicCleaner(cfg, ref, zerolog.Nop())
		if err != nil {
			b.Skipf("requires speexdsp: %v", err)
		}
		defer cl.Close()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			at := epoch.Add(time.Duration(i) * frameDur)
			ref.write(frame, at)
			cl.clean(frame, at.Add(frameDur))
		}
	})
	b.Run("canceller_only", func(b *testing.B) {
		cl, err := newMicCleaner(cfg, newEchoRef(epoch), zerolog.Nop())
		if err != nil {
			b.Skipf("requires speexdsp: %v", err)
		}
		defer cl.Close()
		b.ReportAllocs()
		for b.Loop() {
			cl.process(frame, frame)
		}
	})
}
