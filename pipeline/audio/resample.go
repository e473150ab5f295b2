package audio

import (
	"fmt"
	"math"
	"sync"
)

// Filter design. The prototype low-pass is a Kaiser-windowed sinc whose
// stop band starts exactly at the lower of the two Nyquist frequencies, so
// nothing above the new Nyquist folds back (downsampling) and no image
// survives (upsampling). The pass band runs to passFraction of that Nyquist:
// 0.85 keeps 6.8 kHz at 16 kHz, the top of pocketsphinx's default mel
// filterbank (-upperf 6855), so ASR loses nothing it would use.
const (
	passFraction  = 0.85
	stopAttenDB   = 90.0 // about the PCM16 quantisation floor; more buys nothing
	resampleBlock = 1024 // input samples converted per inner pass
)

// polyphaseFilter is the immutable filter bank for one (in, out) rate pair.
// Row p (p < up) holds the taps for output instants p/up of an input sample
// after an integer input position; rows are shared by every Resampler of
// the pair.
type polyphaseFilter struct {
	up, down int       // output/input rate ratio in lowest terms: out/in = up/down
	taps     int       // taps per phase (even)
	coef     []float32 // up rows of taps, row-major
}

var (
	filterCacheMu sync.Mutex
	// filterCache maps a rate pair to its *polyphaseFilter; guarded by filterCacheMu.
	filterCache = map[[2]int]*polyphaseFilter{}
)

// Resampler converts mono PCM16 between rates, keeping filter state across
// calls (streaming). It is a rational L/M polyphase windowed-sinc resampler:
// each output sample is one dot product of taps input samples with one of
// L precomputed phases, so the cost is taps multiply-adds per output sample
// whatever the ratio.
//
// The output is aligned with the input: output sample n is the signal at
// input time n*inRate/outRate. The filter's half length (taps/2 input
// samples, 2.4 ms for 48→16 kHz, 2.4 ms for 16→48 kHz) is held back until
// later input arrives; over a long stream the output length is exactly
// ceil((inputs - taps/2) * outRate / inRate), without drift.
type Resampler struct {
	inRate, outRate int
	filt            *polyphaseFilter // nil when inRate == outRate

	// buf holds buffered input as float32, starting at the next output's tap
	// window; its capacity is taps+resampleBlock and never grows.
	buf   []float32
	phase int // the next output's position past buf[0], in 1/up input samples
}

// commonRates are the rates NewResampler accepts.
var commonRates = [...]int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

// ValidResampleRate reports whether NewResampler accepts rate.
func ValidResampleRate(rate int) bool {
	for _, r := range commonRates {
		if r == rate {
			return true
		}
	}
	return false
}

// NewResampler returns a Resampler from inRate to outRate. Both must be one
// of 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100 or 48000 Hz.
func NewResampler(inRate, outRate int) (*Resampler, error) {
	if !ValidResampleRate(inRate) {
		return nil, fmt.Errorf("%w: resampler input %d Hz (want one of %v)", ErrSampleRate, inRate, commonRates)
	}
	if !ValidResampleRate(outRate) {
		return nil, fmt.Errorf("%w: resampler output %d Hz (want one of %v)", ErrSampleRate, outRate, commonRates)
	}
	r := &Resampler{inRate: inRate, outRate: outRate}
	if inRate != outRate {
		r.filt = filterFor(inRate, outRate)
		r.buf = make([]float32, 0, r.filt.taps+resampleBlock)
	}
	r.Reset()
	return r, nil
}

// InRate returns the input sample rate.
func (r *Resampler) InRate() int { return r.inRate }

// OutRate returns the output sample rate.
func (r *Resampler) OutRate() int { return r.outRate }

// MaxOutput returns an upper bound on the samples one Process call returns
// for n input samples; a dst with this capacity is never grown.
func (r *Resampler) MaxOutput(n int) int {
	if r.filt == nil {
		return n
	}
	return int((int64(n)*int64(r.filt.up))/int64(r.filt.down)) + 2
}

// Reset forgets all buffered input, as if the Resampler were new.
func (r *Resampler) Reset() {
	if r.filt == nil {
		return
	}
	// taps/2-1 leading zeros put input sample 0 at the centre of output 0's
	// window, which makes the output time-aligned with the input.
	r.buf = r.buf[:r.filt.taps/2-1]
	clear(r.buf)
	r.phase = 0
}

// Process resamples src and returns the output in dst[:0] (grown only if its
// capacity is short; MaxOutput(len(src)) always suffices). dst must not
// overlap src. Input that cannot yet produce output (the last
// taps/2 samples) is kept for the next call, so splitting a stream into
// chunks of any size gives exactly the same samples as one call.
func (r *Resampler) Process(dst, src []int16) []int16 {
	if r.filt == nil {
		return append(dst[:0], src...)
	}
	return r.process(dst[:0], src)
}

// process appends the output for src to dst.
func (r *Resampler) process(dst, src []int16) []int16 {
	f := r.filt
	for len(src) > 0 {
		// Append as much input as fits after the retained history.
		n := min(cap(r.buf)-len(r.buf), len(src))
		start := len(r.buf)
		r.buf = r.buf[:start+n]
		for i, s := range src[:n] {
			r.buf[start+i] = float32(s)
		}
		src = src[n:]

		buf, pos, phase := r.buf, 0, r.phase
		taps, up, down := f.taps, f.up, f.down
		stepInt, stepFrac := down/up, down%up
		for pos+taps <= len(buf) {
			row := f.coef[phase*taps : phase*taps+taps]
			dst = append(dst, toInt16(dot(row, buf[pos:pos+taps])))
			pos += stepInt
			phase += stepFrac
			if phase >= up {
				phase -= up
				pos++
			}
		}
		// Keep buf[pos:] (the next windows' samples) at the front. pos never
		// passes len(buf): one step (down/up+1) is shorter than the window.
		kept := copy(buf, buf[pos:])
		r.buf = buf[:kept]
		r.phase = phase
	}
	return dst
}

// Flush returns in dst[:0] the output still held back (the last taps/2
// input samples, as if the stream were followed by silence) and resets the
// Resampler. Use it when a stream ends for good, e.g. the end of a TTS
// answer; between pieces of one stream just keep calling Process.
func (r *Resampler) Flush(dst []int16) []int16 {
	dst = dst[:0]
	if r.filt == nil {
		return dst
	}
	var zeros [64]int16
	for left := r.filt.taps / 2; left > 0; {
		n := min(left, len(zeros))
		dst = r.process(dst, zeros[:n])
		left -= n
	}
	r.Reset()
	return dst
}

// dot is the inner product of two equal-length vectors, unrolled eight
// ways (independent accumulators let the CPU overlap the multiply-adds;
// reslicing lets the compiler drop the bounds checks). The summation order
// depends only on the data, never on how the stream was chunked.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(a) >= 8 {
		a8, b8 := a[:8:8], b[:8:8]
		s0 += a8[0] * b8[0]
		s1 += a8[1] * b8[1]
		s2 += a8[2] * b8[2]
		s3 += a8[3] * b8[3]
		s4 += a8[4] * b8[4]
		s5 += a8[5] * b8[5]
		s6 += a8[6] * b8[6]
		s7 += a8[7] * b8[7]
		a, b = a[8:], b[8:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func toInt16(v float32) int16 {
	if v >= 32767 {
		return 32767
	}
	if v <= -32768 {
		return -32768
	}
	if v >= 0 {
		return int16(v + 0.5)
	}
	return int16(v - 0.5)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// filterFor returns the shared filter bank for a rate pair, designing it on
// first use.
func filterFor(inRate, outRate int) *polyphaseFilter {
	key := [2]int{inRate, outRate}
	filterCacheMu.Lock()
	defer filterCacheMu.Unlock()
	if f, ok := filterCache[key]; ok {
		return f
	}
	f := designFilter(inRate, outRate)
	filterCache[key] = f
	return f
}

// designFilter builds the polyphase bank. All frequencies below are in
// cycles per input sample.
func designFilter(inRate, outRate int) *polyphaseFilter {
	g := gcd(inRate, outRate)
	up, down := outRate/g, inRate/g
	nyquist := 0.5 * float64(min(inRate, outRate)) / float64(inRate)
	transition := (1 - passFraction) * nyquist
	cutoff := nyquist - transition/2 // -6 dB point, midway through the transition
	// Kaiser's estimate of the window length for the wanted attenuation and
	// transition width (in input samples, i.e. taps per phase).
	length := (stopAttenDB - 7.95) / (2.285 * 2 * math.Pi * transition)
	taps := int(math.Ceil(length))
	taps += taps & 1 // even: the window is symmetric about each phase's point
	beta := 0.1102 * (stopAttenDB - 8.7)
	half := float64(taps) / 2
	i0Beta := besselI0(beta)

	coef := make([]float32, up*taps)
	row := make([]float64, taps)
	for p := range up {
		// Output instant is p/up after buf[pos+taps/2-1]; tap j sits at
		// pos+j, so its offset from the instant is taps/2-1+p/up-j, which
		// lies within (-taps/2, taps/2).
		var sum float64
		for j := range taps {
			t := half - 1 + float64(p)/float64(up) - float64(j)
			x := t / half
			w := 0.0
			if x > -1 && x < 1 {
				w = besselI0(beta*math.Sqrt(1-x*x)) / i0Beta
			}
			row[j] = 2 * cutoff * sinc(2*cutoff*t) * w
			sum += row[j]
		}
		// Normalise each phase to unit DC gain so phases do not modulate a
		// constant signal (that would be an image of DC).
		for j := range taps {
			coef[p*taps+j] = float32(row[j] / sum)
		}
	}
	return &polyphaseFilter{up: up, down: down, taps: taps, coef: coef}
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// besselI0 is the zeroth-order modified Bessel function of the first kind,
// by its power series (converges fast for the beta values used here).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; k < 200; k++ {
		term *= q / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}
