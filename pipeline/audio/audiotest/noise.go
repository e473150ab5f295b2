package audiotest

import (
	"math"
	"math/rand/v2"
)

// Noises of rooms, at unit RMS, for mixing under speech (Mix). All are
// deterministic for a given rng.

// Pink returns n samples of pink (1/f) noise: white noise through a sum of
// seven one-pole filters (Paul Kellet's refined method, within 0.05 dB of
// -3 dB/octave from 10 Hz to Nyquist at 44.1 kHz).
func Pink(n int, rng *rand.Rand) []float64 {
	out := make([]float64, n)
	var b0, b1, b2, b3, b4, b5, b6 float64
	for i := range out {
		w := rng.NormFloat64()
		b0 = 0.99886*b0 + w*0.0555179
		b1 = 0.99332*b1 + w*0.0750759
		b2 = 0.96900*b2 + w*0.1538520
		b3 = 0.86650*b3 + w*0.3104856
		b4 = 0.55000*b4 + w*0.5329522
		b5 = -0.7616*b5 - w*0.0168980
		out[i] = b0 + b1 + b2 + b3 + b4 + b5 + b6 + w*0.5362
		b6 = w * 0.115926
	}
	return unitRMS(highPass(out))
}

// Brown returns n samples of brown (1/f²) noise: integrated white noise,
// leaky below ~5 Hz at 16 kHz so it does not wander off.
func Brown(n int, rng *rand.Rand) []float64 {
	out := make([]float64, n)
	var y float64
	for i := range out {
		y = 0.998*y + rng.NormFloat64()
		out[i] = y
	}
	return unitRMS(highPass(out))
}

// Music returns n samples at rate of synthesized music: a melody of eighth
// notes at 112 beats a minute over a bass line and held chords, in C major,
// every note a tone with six harmonics, a 10 ms attack and an exponential
// decay, as a piano or a radio in the next room.
func Music(n, rate int, rng *rand.Rand) []float64 {
	out := make([]float64, n)
	scale := []int{0, 2, 4, 5, 7, 9, 11} // C major, semitones from C
	note := func(start, length int, midi, amp float64) {
		f := 440 * math.Pow(2, (midi-69)/12)
		for i := 0; i < length && start+i < n; i++ {
			t := float64(i) / float64(rate)
			env := min(1, t/0.01) * math.Exp(-3*t)
			var v float64
			for k := 1; k <= 6 && float64(k)*f < float64(rate)/2; k++ {
				v += math.Sin(2*math.Pi*float64(k)*f*t) / float64(k*k)
			}
			out[start+i] += amp * env * v
		}
	}
	eighth := rate * 60 / 112 / 2
	degree := 0
	for bar, pos := 0, 0; pos < n; bar++ {
		root := []int{0, 5, 3, 4}[bar%4] // I vi IV V in scale degrees
		chord := []int{root, root + 2, root + 4}
		for _, d := range chord {
			note(pos, 8*eighth, float64(48+12*(d/7)+scale[d%7]), 0.25)
		}
		for beat := range 8 {
			if beat%4 == 0 {
				note(pos+beat*eighth, 4*eighth, float64(36+scale[root%7]), 0.5)
			}
			degree = max(0, min(13, degree+rng.IntN(5)-2))
			if rng.IntN(8) != 0 { // a rest now and then
				note(pos+beat*eighth, 2*eighth, float64(60+12*(degree/7)+scale[degree%7]), 0.6)
			}
		}
		pos += 8 * eighth
	}
	return unitRMS(out)
}

// Mix returns speech with noise added so that the speech's active level
// (SpeechLevel) is snrDB over the noise's RMS; noise repeats if short.
// Samples are clipped to PCM16.
func Mix(speech []int16, noise []float64, snrDB float64) []int16 {
	gain := math.Pow(10, (SpeechLevel(speech)-snrDB)/20) * 32768 / rms(noise)
	out := make([]int16, len(speech))
	for i, s := range speech {
		out[i] = clip16(float64(s) + gain*noise[i%len(noise)])
	}
	return out
}

// Scale returns noise as PCM16 at rmsDBFS.
func Scale(noise []float64, rmsDBFS float64) []int16 {
	gain := math.Pow(10, rmsDBFS/20) * 32768 / rms(noise)
	out := make([]int16, len(noise))
	for i, v := range noise {
		out[i] = clip16(gain * v)
	}
	return out
}

// SpeechLevel returns the active level of speech in dBFS: the RMS over the
// 20 ms frames (at 16 kHz) within 35 dB of the loudest, so that pauses and
// the silence around the words do not lower it (after ITU-T P.56's idea).
func SpeechLevel(speech []int16) float64 {
	const frame = 320
	var energies []float64
	loudest := 0.0
	for off := 0; off+frame <= len(speech); off += frame {
		var e float64
		for _, s := range speech[off : off+frame] {
			e += float64(s) * float64(s)
		}
		e /= frame
		energies = append(energies, e)
		loudest = max(loudest, e)
	}
	var sum float64
	var count int
	for _, e := range energies {
		if e >= loudest*math.Pow(10, -3.5) {
			sum += e
			count++
		}
	}
	if count == 0 {
		return -100
	}
	return 10 * math.Log10(sum/float64(count)/(32768*32768)+1e-10)
}

func rms(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s/float64(max(1, len(x)))) + 1e-12
}

func unitRMS(x []float64) []float64 {
	g := 1 / rms(x)
	for i := range x {
		x[i] *= g
	}
	return x
}

// highPass removes DC and the lowest rumble (a one-pole high-pass near 16 Hz
// at 16 kHz), which a microphone would not pass either.
func highPass(x []float64) []float64 {
	var x1, y1 float64
	for i, v := range x {
		y := v - x1 + 0.994*y1
		x1, y1 = v, y
		x[i] = y
	}
	return x
}

func clip16(v float64) int16 { return int16(max(-32768, min(32767, math.Round(v)))) }
