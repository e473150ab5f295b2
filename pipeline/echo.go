package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/cgo/speexdsp"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Server-side echo cancellation and noise suppression (docs/rooms.md).
//
// A device without echo cancellation of its own hears the answer it plays
// and sends it back up with the person's voice. The session knows exactly
// what it sent, so the pacer writes every frame it hands to the transport
// into an echoRef, on a 16 kHz timeline at the time the client starts
// playing it, and audio-in gives the canceller, for every microphone
// frame, the reference for the same instant. What lies between the two
// (the downlink, the client's jitter buffer, the loudspeaker, the room, the
// microphone, the uplink) is unknown and changes: it is left to the
// canceller's adaptive filter, whose tail (EchoConfig.TailMs) covers it, and
// whose strongest tap is the delay it has found (logged as it moves).

// EchoMode says which sessions cancel echo.
type EchoMode string

// Echo modes.
const (
	EchoAuto EchoMode = "auto" // sessions whose device does not cancel its echo (Config.DeviceEcho)
	EchoOn   EchoMode = "on"   // every session
	EchoOff  EchoMode = "off"  // none
)

// EchoConfig sets up server-side echo cancellation.
type EchoConfig struct {
	Mode EchoMode
	// MaxDelayMs is the longest delay from sending a frame to its echo
	// coming back that is searched for (network both ways, the device's
	// playout buffer); 0 = DefaultEchoMaxDelayMs.
	MaxDelayMs int
	// TailMs is the canceller's adaptive filter after that delay: the
	// room's reverberation and the delay estimate's error; 0 =
	// DefaultEchoTailMs.
	TailMs int
}

// DefaultEchoMaxDelayMs covers a speaker's playout and the network both
// ways (20-250 ms) with room to spare.
const DefaultEchoMaxDelayMs = 400

// DefaultEchoTailMs covers a room's early reverberation after the delay
// estimate (20 ms grain). On flite speech through a 150 ms path (echoPath)
// a filter this short, after the delay, took 30 dB off from the first
// 200 ms; one of 400 ms covering the delay as well gave 3-8 dB over the
// first 2 s and reached 20 dB after ~3 s.
const DefaultEchoTailMs = 150

// DenoiseConfig sets up noise suppression before the VAD and the
// recogniser.
type DenoiseConfig struct {
	On bool
	// MaxDB is the largest attenuation of noise (negative); 0 = speexdsp's -15 dB.
	MaxDB int
}

// cleanFrameSamples: the processor works on 10 ms halves of each 20 ms
// frame; its noise suppressor delays the audio by one of them (the echo
// canceller by nothing).
const cleanFrameSamples = asrRate / 100

// echoRing holds 2 s of reference: more than any delay and tail.
const echoRing = 2 * asrRate

// echoCancelled says whether the session cancels echo.
func (cfg Config) echoCancelled() bool {
	return cfg.Echo.Mode == EchoOn || (cfg.Echo.Mode == EchoAuto && cfg.DeviceEcho)
}

// checkRoom validates the echo and denoise settings.
func (cfg Config) checkRoom() (Config, error) {
	switch cfg.Echo.Mode {
	case "":
		cfg.Echo.Mode = EchoAuto
	case EchoAuto, EchoOn, EchoOff:
	default:
		return cfg, fmt.Errorf("%w: echo mode %q (want auto, on or off)", ErrConfig, string(cfg.Echo.Mode))
	}
	if cfg.Echo.TailMs == 0 {
		cfg.Echo.TailMs = DefaultEchoTailMs
	}
	if cfg.Echo.TailMs < 20 || cfg.Echo.TailMs > 1000 {
		return cfg, fmt.Errorf("%w: echo tail %d ms (want 20 to 1000)", ErrConfig, cfg.Echo.TailMs)
	}
	if cfg.Echo.MaxDelayMs == 0 {
		cfg.Echo.MaxDelayMs = DefaultEchoMaxDelayMs
	}
	if cfg.Echo.MaxDelayMs < 0 || cfg.Echo.MaxDelayMs > 1000 {
		return cfg, fmt.Errorf("%w: echo delay %d ms (want 0 to 1000)", ErrConfig, cfg.Echo.MaxDelayMs)
	}
	if cfg.Denoise.MaxDB > 0 || cfg.Denoise.MaxDB < -60 {
		return cfg, fmt.Errorf("%w: denoise attenuation %d dB (want -60 to 0)", ErrConfig, cfg.Denoise.MaxDB)
	}
	return cfg, nil
}

// echoRef is the audio the session sent, on a 16 kHz timeline from epoch:
// the pacer writes it, audio-in reads it. mu guards the fields below it; a
// write or read copies 20 ms (BenchmarkEchoRef).
type echoRef struct {
	epoch time.Time

	mu   sync.Mutex
	ring []int16 // sample at timeline position p is ring[p%len(ring)]
	end  int64   // the position after the last written sample
}

func newEchoRef(epoch time.Time) *echoRef {
	return &echoRef{epoch: epoch, ring: make([]int16, echoRing)}
}

// pos is t's position on the timeline.
func (r *echoRef) pos(t time.Time) int64 {
	return int64(t.Sub(r.epoch)) * asrRate / int64(time.Second)
}

// write puts pcm (16 kHz) on the timeline where the client starts playing
// it, at or after what was written before (a client plays its queue in
// order); a gap before it is silence.
func (r *echoRef) write(pcm []int16, playAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := max(r.end, r.pos(playAt))
	if gap := start - r.end; gap > 0 {
		r.zeroLocked(r.end, min(gap, int64(len(r.ring))))
	}
	n := int64(len(r.ring))
	for i := 0; i < len(pcm); {
		at := int((start + int64(i)) % n)
		i += copy(r.ring[at:], pcm[i:])
	}
	r.end = start + int64(len(pcm))
}

// cut forgets what was written for after t: the client dropped the audio
// it held (a barge-in), so none of it plays.
func (r *echoRef) cut(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := max(r.pos(t), r.end-int64(len(r.ring))); p < r.end {
		r.zeroLocked(p, r.end-p)
		r.end = p
	}
}

// zeroLocked clears n samples from position from; r.mu must be held.
func (r *echoRef) zeroLocked(from, n int64) {
	size := int64(len(r.ring))
	for n > 0 {
		at := from % size
		k := min(n, size-at)
		clear(r.ring[at : at+k])
		from, n = from+k, n-k
	}
}

// read fills dst with the timeline from position from; what was never
// written (or is older than the ring) is silence.
func (r *echoRef) read(dst []int16, from int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := int64(len(r.ring))
	for i := range dst {
		p := from + int64(i)
		if p < 0 || p >= r.end || p < r.end-size {
			dst[i] = 0
			continue
		}
		dst[i] = r.ring[p%size]
	}
}

// echoTap is the pacer's side: it resamples the frames sent to 16 kHz and
// writes them into the reference. Owned by the pacer's goroutine.
type echoTap struct {
	ref *echoRef
	rs  *audio.Resampler // OutputRate → 16 kHz; nil when equal
	buf []int16
}

func newEchoTap(ref *echoRef, outRate int) (*echoTap, error) {
	tp := &echoTap{ref: ref}
	if outRate != asrRate {
		rs, err := audio.NewResampler(outRate, asrRate)
		if err != nil {
			return nil, fmt.Errorf("%w: echo reference: %w", ErrConfig, err)
		}
		tp.rs = rs
		tp.buf = make([]int16, 0, rs.MaxOutput(outRate*frameMs/1000))
	}
	return tp, nil
}

// sent records a frame handed to the transport that the client starts
// playing at playAt.
func (tp *echoTap) sent(pcm []int16, playAt time.Time) {
	if tp.rs != nil {
		tp.buf = tp.rs.Process(tp.buf, pcm)
		pcm = tp.buf
	}
	tp.ref.write(pcm, playAt)
}

// flushed: the client dropped what it held from now on.
func (tp *echoTap) flushed(now time.Time) { tp.ref.cut(now) }

// maxMicLag is how far the microphone's clock may fall behind the arrival
// of its audio before it is put back (the client stopped sending for a
// while, or its clock drifted).
const maxMicLag = 200 * time.Millisecond

// micCleaner is audio-in's side: echo cancellation against the reference
// and noise suppression, in place of the frame the VAD and the recogniser
// get. Owned by audio-in's goroutine; Close frees the C state.
//
// Echo is handled in three steps. The bulk delay of the path is found by
// correlating the envelopes (20 ms energies) of the microphone and the
// reference over the last 1.5 s (echoDelay), and the reference is read that
// much later; the speexdsp canceller's adaptive filter (EchoConfig.TailMs)
// covers what is left (the room, the estimate's 20 ms grain). speexdsp's
// residual echo suppressor is not used: it delays the audio by a frame and
// made barge-ins slower (with the whole-band gate of the time: 1.11 s for
// the first of four, 430-490 ms for the last two, against 870 ms and
// 410-430 ms without it, TestEchoBargeIn's trial) for no fewer
// self-interruptions. An adaptive filter needs a second or
// more to converge, and an energy VAD hears the residual of a loud echo
// long before that: the last step gates frames whose energy is not clearly
// above the echo expected there (the reference's energy at the path's delay
// times the path's gain, less what the canceller removes), in the whole
// band and in the high band alike, so the VAD and the recogniser only hear
// the person. The high band lets a word's soft first consonant through:
// with the whole band alone the "s" of "stop", 17 dB under the echo, was
// gated and barge-ins took 417 ms from the speech's onset instead of 193 ms
// (TestEchoBargeIn's trial).
type micCleaner struct {
	proc *speexdsp.Processor
	ref  *echoRef // nil: noise suppression only
	log  zerolog.Logger

	refBuf, out []int16 // one 20 ms frame each
	// micPos is the timeline position of the next microphone sample: the
	// client's capture clock, anchored on the audio's arrival.
	micPos   int64
	anchored bool
	frames   int // cleaned, for the summary at Close
	gated    int // of them brought down to the noise floor

	delay echoDelay
	// hf is the same for the frames' high band (first differences), at
	// delay's lag: a fricative that starts a word ("stop") is far under the
	// echo's energy but over its high band.
	hf    echoDelay
	bulk  int64 // samples the reference is read late by (from delay)
	floor noiseFloor
}

// noiseFloor follows the lowest frame energy: down at once, up by 1 dB a
// second.
type noiseFloor struct{ energy float64 }

// floorRise is 1 dB per second in 20 ms frames.
var floorRise = math.Pow(10, 0.1*float64(frameMs)/1000)

func (f *noiseFloor) add(e float64) {
	switch {
	case f.energy == 0 || e < f.energy:
		f.energy = max(e, 1)
	default:
		f.energy *= floorRise
	}
}

// errNoCleaner: the session asked for echo cancellation or noise
// suppression and the build has no speexdsp.
var errNoCleaner = errors.New("echo cancellation and noise suppression need speexdsp (a cgo build)")

func newMicCleaner(cfg Config, ref *echoRef, log zerolog.Logger) (*micCleaner, error) {
	pc := speexdsp.Config{SampleRate: asrRate, FrameSamples: cleanFrameSamples,
		Denoise: cfg.Denoise.On, NoiseSuppressDB: cfg.Denoise.MaxDB}
	if ref != nil {
		pc.EchoTailSamples = asrRate * cfg.Echo.TailMs / 1000
	}
	proc, err := speexdsp.NewProcessor(pc)
	if errors.Is(err, speexdsp.ErrNoCgo) {
		return nil, errNoCleaner
	}
	if err != nil {
		return nil, err
	}
	n := asrRate * frameMs / 1000
	c := &micCleaner{proc: proc, ref: ref, log: log, refBuf: make([]int16, n), out: make([]int16, n)}
	c.delay.init(cfg.Echo.MaxDelayMs / frameMs)
	c.hf.init(cfg.Echo.MaxDelayMs / frameMs)
	c.hf.follows = true
	return c, nil
}

// clean returns frame's cleaned copy (in c's own buffer, valid until the
// next call); arrived is when the frame's audio reached the server.
func (c *micCleaner) clean(frame []int16, arrived time.Time) []int16 {
	if len(frame) != len(c.out) {
		return frame
	}
	if c.ref == nil {
		return c.process(frame, nil)
	}
	n := int64(len(frame))
	// The capture clock runs on sample by sample; it is put back on the
	// arrival time when the client skipped ahead (it sent nothing for a
	// while) and never runs ahead of arrival.
	latest := c.ref.pos(arrived) - n
	if !c.anchored || c.micPos < latest-int64(maxMicLag)*asrRate/int64(time.Second) || c.micPos > latest {
		c.micPos, c.anchored = latest, true
	}
	// The envelope at no delay, for the delay estimate...
	c.ref.read(c.refBuf, c.micPos)
	refE, refH := frameEnergy(c.refBuf), highEnergy(c.refBuf)
	micE, micH := frameEnergy(frame), highEnergy(frame)
	// ...and the reference the canceller gets, the bulk delay late.
	if c.bulk > 0 {
		c.ref.read(c.refBuf, c.micPos-c.bulk)
	}
	c.micPos += n
	out := c.process(frame, c.refBuf)
	outE, outH := frameEnergy(out), highEnergy(out)
	c.hf.add(refH, micH, outH)
	if lag, moved := c.delay.add(refE, micE, outE); moved {
		c.hf.lag = lag
		if bulk := int64(max(0, lag-1)) * n; bulk != c.bulk {
			c.bulk = bulk
			c.proc.Reset()
			c.delay.restarted()
			c.hf.restarted()
		}
		c.log.Debug().Int("echo_delay_ms", lag*frameMs).Float64("echo_gain_db", c.delay.gainDB()).
			Msg("echo path delay (envelope correlation): the canceller starts over at it")
	}
	c.floor.add(outE)
	c.frames++
	if c.delay.masks(outE) && c.hf.masks(outH) && outE > c.floor.energy {
		c.gated++
		// Down to the room's noise floor: quieter would be a hole the VAD
		// takes for a new, lower floor (and the noise after it for speech).
		g := math.Sqrt(c.floor.energy / outE)
		for i, v := range out {
			out[i] = int16(float64(v) * g)
		}
	}
	return out
}

// process runs the processor over the frame's 10 ms halves into c.out.
func (c *micCleaner) process(frame, ref []int16) []int16 {
	for i := 0; i < len(frame); i += cleanFrameSamples {
		var r []int16
		if ref != nil {
			r = ref[i : i+cleanFrameSamples]
		}
		if err := c.proc.Process(frame[i:i+cleanFrameSamples], r, c.out[i:i+cleanFrameSamples]); err != nil {
			c.log.Error().Err(err).Msg("echo canceller failed: passing the audio through")
			return frame
		}
	}
	return c.out
}

// Close frees the processor; idempotent. With echo cancellation it logs
// what the session found of the echo path.
func (c *micCleaner) Close() error {
	if c.ref != nil && c.frames > 0 {
		ev := c.log.Debug().Int("frames", c.frames).Int("gated", c.gated)
		if c.delay.lag >= 0 {
			ev = ev.Int("echo_delay_ms", c.delay.lag*frameMs).Float64("echo_gain_db", c.delay.gainDB()).
				Float64("erle_db", 10*math.Log10(max(1, c.delay.erle)))
		}
		ev.Msg("echo cancellation: the path found, and the frames gated as echo")
		c.frames = 0
	}
	return c.proc.Close()
}

// highEnergy is the mean square of the first differences: the energy
// weighted up 6 dB an octave, mostly what lies over 2 kHz.
func highEnergy(pcm []int16) float64 {
	var e float64
	for i := 1; i < len(pcm); i++ {
		d := float64(pcm[i]) - float64(pcm[i-1])
		e += d * d
	}
	return e / float64(len(pcm))
}

func frameEnergy(pcm []int16) float64 {
	var e float64
	for _, s := range pcm {
		e += float64(s) * float64(s)
	}
	return e / float64(len(pcm))
}

// Envelope delay estimation and the echo gate: all in 20 ms frames.
const (
	delayWindow = 75 // frames correlated: 1.5 s
	delayEvery  = 10 // a new estimate every 200 ms
	// initialGain is the path's gain assumed before the first estimate:
	// +6 dB, a loud speaker beside its microphone (a gate too strict for
	// the first few hundred ms of an answer rather than one that lets the
	// echo interrupt it).
	initialGain = 4.0
	// A window whose reference is this loud in at least a fifth of its
	// frames (-50 dBFS) says something about the path.
	activeEnergy = 100.0
	// minCorr: a correlation peak under this is not trusted.
	minCorr = 0.5
	// gateMargin: a frame passes the gate when it is this much (6 dB)
	// louder than the echo left after cancellation...
	gateMargin = 4.0
	// ...within these bounds of the echo at the microphone: never more
	// than 3 dB under its level, never less than 15 dB under it.
	gateMax, gateMin = 0.5, 1.0 / 32
)

// echoDelay estimates the echo path from the frames' energies: its delay
// (the lag of the reference envelope that best correlates with the
// microphone's), its gain (the microphone's energy against the
// reference's at that lag) and the canceller's echo return loss
// enhancement, and gates the frames the echo alone explains.
type echoDelay struct {
	maxLag            int
	ref, mic, out     []float64 // rings of delayWindow+maxLag frames
	n                 int       // frames added
	lag               int       // -1 before the first estimate
	candidate         int       // an estimate waiting for its confirmation
	gain, erle        float64   // linear energy ratios
	echoNow           float64   // the echo expected in the last frame
	follows           bool      // lag is set from outside, not estimated
	scratch, scratch2 []float64 // delayWindow each, for estimate
}

func (d *echoDelay) init(maxLag int) {
	size := delayWindow + maxLag + 4
	d.maxLag = maxLag
	d.ref, d.mic, d.out = make([]float64, size), make([]float64, size), make([]float64, size)
	d.scratch, d.scratch2 = make([]float64, 0, delayWindow), make([]float64, 0, delayWindow)
	d.lag, d.candidate, d.gain, d.erle = -1, -1, initialGain, 1
}

func (d *echoDelay) at(ring []float64, back int) float64 {
	if back >= d.n || back >= len(ring) {
		return 0
	}
	return ring[(d.n-1-back)%len(ring)]
}

// add records one frame; it returns the delay in frames when the estimate
// moved to it.
func (d *echoDelay) add(refE, micE, outE float64) (lag int, moved bool) {
	size := len(d.ref)
	d.ref[d.n%size], d.mic[d.n%size], d.out[d.n%size] = refE, micE, outE
	d.n++
	// The echo expected in this frame: the loudest reference frame the
	// path (the lag, and 60 ms of room after it) brings here.
	lo, hi := 0, d.maxLag
	if d.lag >= 0 {
		lo, hi = max(0, d.lag-1), d.lag+3
	}
	var e float64
	for b := lo; b <= hi; b++ {
		e = max(e, d.at(d.ref, b))
	}
	d.echoNow = e * d.gain
	if d.n%delayEvery != 0 {
		return d.lag, false
	}
	return d.estimate()
}

// estimate correlates the envelopes (amplitudes, mean removed) over the
// last delayWindow frames at every lag.
func (d *echoDelay) estimate() (int, bool) {
	active := 0
	for i := range delayWindow {
		if d.at(d.ref, i) > activeEnergy {
			active++
		}
	}
	if active < delayWindow/5 {
		return d.lag, false
	}
	if d.follows {
		if d.lag >= 0 {
			d.measure(d.lag)
		}
		return d.lag, false
	}
	var mm float64
	for i := range delayWindow {
		mm += math.Sqrt(d.at(d.mic, i))
	}
	mm /= delayWindow
	best, bestLag := -1.0, -1
	for lag := 0; lag <= d.maxLag; lag++ {
		var rm float64
		for i := range delayWindow {
			rm += math.Sqrt(d.at(d.ref, i+lag))
		}
		rm /= delayWindow
		var sxy, sxx, syy float64
		for i := range delayWindow {
			x, y := math.Sqrt(d.at(d.mic, i))-mm, math.Sqrt(d.at(d.ref, i+lag))-rm
			sxy, sxx, syy = sxy+x*y, sxx+x*x, syy+y*y
		}
		if c := sxy / math.Sqrt(sxx*syy+1e-9); c > best {
			best, bestLag = c, lag
		}
	}
	if best < minCorr {
		return d.lag, false
	}
	d.measure(bestLag)
	switch {
	case d.lag < 0, bestLag == d.candidate && abs(bestLag-d.lag) > 1:
		d.lag, d.candidate = bestLag, -1
		return d.lag, true
	case abs(bestLag-d.lag) > 1:
		d.candidate = bestLag // moved: wait for a second estimate to agree
	default:
		d.candidate = -1
	}
	return d.lag, false
}

// measure estimates the path's gain and the canceller's enhancement at
// lag over the window.
func (d *echoDelay) measure(bestLag int) {
	// The path's gain and what the canceller takes off, over the frames
	// of the window where the reference played: ratios per frame, so that
	// the person speaking over it (the microphone louder, the canceller
	// taking off less) moves them only in the frames where they speak: the
	// gain is the median, the enhancement the upper quartile (frames of
	// echo alone).
	gains, erles := d.scratch[:0], d.scratch2[:0]
	for i := range delayWindow {
		r := d.at(d.ref, i+bestLag)
		if r <= activeEnergy {
			continue
		}
		m := d.at(d.mic, i)
		gains = append(gains, m/r)
		erles = append(erles, m/max(d.at(d.out, i), 1))
	}
	slices.Sort(gains)
	slices.Sort(erles)
	if len(gains) == 0 {
		return
	}
	d.gain = min(16, gains[len(gains)/2])
	d.erle = max(1, erles[len(erles)*3/4])
}

// restarted: the canceller starts over (at a new delay); until the next
// estimate it is assumed to remove nothing, and the gate lets through only
// what is clearly louder than the echo.
func (d *echoDelay) restarted() { d.erle = 0 }

// masks says whether a cleaned frame of energy outE is echo alone.
func (d *echoDelay) masks(outE float64) bool {
	if d.echoNow < activeEnergy {
		return false
	}
	if d.erle == 0 {
		return outE < 2*d.echoNow
	}
	thr := d.echoNow * min(gateMax, max(gateMin, gateMargin/d.erle))
	return outE < thr
}

func (d *echoDelay) gainDB() float64 { return 10 * math.Log10(d.gain) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// room sets up the session's echo cancellation and noise suppression on
// ain and pc, and returns the cleaner to Close when the session ends (nil
// when it does neither). A build without speexdsp logs why and serves on
// without.
func (s *Session) room(ain *audioIn, pc *pacer, log zerolog.Logger) *micCleaner {
	echo := s.cfg.echoCancelled()
	if !echo && !s.cfg.Denoise.On {
		return nil
	}
	var ref *echoRef
	if echo {
		ref = newEchoRef(time.Now())
	}
	cl, err := newMicCleaner(s.cfg, ref, log)
	if err != nil {
		log.Error().Err(err).Bool("echo", echo).Bool("denoise", s.cfg.Denoise.On).
			Msg("no echo cancellation or noise suppression for this session")
		return nil
	}
	if ref != nil {
		tap, err := newEchoTap(ref, s.cfg.OutputRate)
		if err != nil {
			_ = cl.Close()
			log.Error().Err(err).Msg("no echo cancellation for this session")
			return nil
		}
		pc.echo = tap
	}
	ain.clean = cl
	log.Debug().Bool("echo", echo).Int("echo_tail_ms", s.cfg.Echo.TailMs).Bool("denoise", s.cfg.Denoise.On).Msg("cleaning the microphone")
	return cl
}
