//go:build cgo

package flite

import (
	"context"
	"errors"
	"math"
	"sort"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenVoiceUnknown(t *testing.T) {
	if _, err := OpenVoice("cmu_us_nobody"); !errors.Is(err, ErrVoice) {
		t.Fatalf("OpenVoice = %v, want ErrVoice", err)
	}
}

func TestEmitErrorStopsSynthesis(t *testing.T) {
	v, err := OpenVoice("kal16")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	errStop := errors.New("stop here")
	calls := 0
	err = v.Synthesize(context.Background(), "One sentence. Then another one. And a third.", Options{},
		func(pcm []int16, words []WordMark) error {
			calls++
			if calls == 2 {
				return errStop
			}
			return nil
		})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Fatalf("Synthesize = %v after %d chunks, want errStop after 2", err, calls)
	}
	// The next synthesis starts clean.
	samples, marks := 0, 0
	err = v.Synthesize(context.Background(), "Fine again.", Options{}, func(pcm []int16, words []WordMark) error {
		samples += len(pcm)
		marks += len(words)
		return nil
	})
	if err != nil || samples == 0 || marks != 2 {
		t.Fatalf("after a stop: err %v, %d samples, %d marks", err, samples, marks)
	}
}

func TestPitchOptionChangesAudio(t *testing.T) {
	v, err := OpenVoice("slt")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	render := func(opts Options) []int16 {
		var pcm []int16
		if err := v.Synthesize(context.Background(), "This sentence tests the pitch control.", opts, func(p []int16, _ []WordMark) error {
			pcm = append(pcm, p...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return pcm
	}
	// slt's own mean F0 is ~170 Hz; its excitation is random, so compare
	// pitch estimates rather than samples.
	base, high, again := medianF0(render(Options{})), medianF0(render(Options{Pitch: 250})), medianF0(render(Options{}))
	if high < base*1.25 {
		t.Errorf("median F0 %.0f Hz with Pitch 250, %.0f Hz by default", high, base)
	}
	if again < base*0.9 || again > base*1.1 {
		t.Errorf("median F0 %.0f Hz after a pitched synthesis, %.0f Hz before", again, base)
	}
}

// medianF0 estimates the median pitch of the voiced 40 ms frames of pcm by
// normalised autocorrelation over 60-400 Hz.
func medianF0(pcm []int16) float64 {
	const frame, minLag, maxLag = 640, SampleRate / 400, SampleRate / 60
	var f0s []float64
	for start := 0; start+frame+maxLag <= len(pcm); start += frame {
		x := pcm[start : start+frame+maxLag]
		var energy float64
		for _, s := range x[:frame] {
			energy += float64(s) * float64(s)
		}
		if energy/frame < 1e6 {
			continue // silence or weak unvoiced sound
		}
		best, bestLag := 0.0, 0
		for lag := minLag; lag <= maxLag; lag++ {
			var c, e1, e2 float64
			for i := 0; i < frame; i++ {
				a, b := float64(x[i]), float64(x[i+lag])
				c += a * b
				e1 += a * a
				e2 += b * b
			}
			if r := c / math.Sqrt(e1*e2+1); r > best {
				best, bestLag = r, lag
			}
		}
		if best > 0.6 {
			f0s = append(f0s, float64(SampleRate)/float64(bestLag))
		}
	}
	if len(f0s) == 0 {
		return 0
	}
	sort.Float64s(f0s)
	return f0s[len(f0s)/2]
}
