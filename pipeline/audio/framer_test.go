package audio

import (
	"math/rand/v2"
	"testing"
)

func TestFramerArbitraryWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const frame = 320
	src := make([]int16, 10007)
	for i := range src {
		src[i] = int16(i)
	}
	f := NewFramer(frame)
	var got []int16
	frames := 0
	for rest := src; len(rest) > 0; {
		n := min(len(rest), rng.IntN(900))
		f.Write(rest[:n], func(fr []int16) {
			if len(fr) != frame {
				t.Fatalf("frame of %d samples, want %d", len(fr), frame)
			}
			if cap(fr) != frame {
				t.Fatalf("frame capacity %d lets emit append into the caller's data", cap(fr))
			}
			got = append(got, fr...)
			frames++
		})
		rest = rest[n:]
	}
	if frames != len(src)/frame || f.Buffered() != len(src)%frame {
		t.Fatalf("%d frames, %d buffered; want %d, %d", frames, f.Buffered(), len(src)/frame, len(src)%frame)
	}
	for i := range got {
		if got[i] != src[i] {
			t.Fatalf("sample %d = %d, want %d", i, got[i], src[i])
		}
	}
	f.Reset()
	if f.Buffered() != 0 {
		t.Fatalf("Buffered after Reset = %d", f.Buffered())
	}
}

func TestFramerZeroAllocs(t *testing.T) {
	f := NewFramer(320)
	pcm := make([]int16, 441) // 10 ms at 44.1 kHz: never aligned with frames
	var sum int
	emit := func(fr []int16) { sum += len(fr) }
	if a := testing.AllocsPerRun(200, func() { f.Write(pcm, emit) }); a != 0 {
		t.Errorf("%.1f allocations per write, want 0", a)
	}
}

// BenchmarkFramer writes 10 ms pieces at 48 kHz (480 samples) into 20 ms
// frames of 960, the WebRTC → pipeline shape.
func BenchmarkFramer(b *testing.B) {
	f := NewFramer(960)
	pcm := make([]int16, 480)
	var n int
	emit := func(fr []int16) { n += len(fr) }
	b.ReportAllocs()
	for b.Loop() {
		f.Write(pcm, emit)
	}
}
