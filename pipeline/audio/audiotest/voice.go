// Package audiotest makes test audio for the packages that listen to
// speech.
package audiotest

import "math"

// Voice returns ms of a glottal-like voice at rate Hz: a fundamental gliding
// from f0 to f1 Hz with ten harmonics falling 6 dB per octave, loud enough
// for the VAD and the pitch tracker.
func Voice(ms, rate int, f0, f1 float64) []int16 {
	out := make([]int16, rate*ms/1000)
	phase := 0.0
	for i := range out {
		f := f0 + (f1-f0)*float64(i)/float64(len(out))
		phase += 2 * math.Pi * f / float64(rate)
		var v float64
		for k := 1; k <= 10; k++ {
			v += math.Sin(float64(k)*phase) / float64(k)
		}
		out[i] = int16(4000 * v)
	}
	return out
}
