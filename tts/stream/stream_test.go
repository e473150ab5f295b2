package stream

import (
	"context"
	"errors"
	"testing"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const rate = 16000

// tone returns ms of a loud square wave, silence ms of zeros.
func tone(ms int) []int16 {
	pcm := make([]int16, rate*ms/1000)
	for i := range pcm {
		pcm[i] = int16(4000 * (i/8%2*2 - 1))
	}
	return pcm
}

func silence(ms int) []int16 { return make([]int16, rate*ms/1000) }

func cat(parts ...[]int16) []int16 {
	var pcm []int16
	for _, p := range parts {
		pcm = append(pcm, p...)
	}
	return pcm
}

func samples(ms int) int { return rate * ms / 1000 }

// collect runs writes through a Writer and returns what came out.
func collect(t *testing.T, late bool, writes ...func(w *Writer)) []tts.Chunk {
	t.Helper()
	var got []tts.Chunk
	w := NewWriter(Config{SampleRate: rate, LateMarks: late}, func(c tts.Chunk) error {
		got = append(got, c)
		return nil
	})
	for _, f := range writes {
		f(w)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

func write(pcm []int16, words ...tts.WordMark) func(w *Writer) {
	return func(w *Writer) {
		if err := w.Write(pcm, words); err != nil {
			panic(err)
		}
	}
}

func joined(chunks []tts.Chunk) (pcm []int16, marks []tts.WordMark) {
	for _, c := range chunks {
		for _, m := range c.Words {
			inside := m.EndSample > len(pcm) && m.EndSample <= len(pcm)+len(c.PCM)
			if !inside && (len(c.PCM) > 0 || m.EndSample != len(pcm)) {
				panic("mark outside its chunk")
			}
		}
		marks = append(marks, c.Words...)
		pcm = append(pcm, c.PCM...)
	}
	return pcm, marks
}

func TestLeadTrimmedPausesCappedMarksShifted(t *testing.T) {
	for _, late := range []bool{false, true} {
		// 200 ms lead-in, a word, a 400 ms pause, a word, 300 ms tail, in
		// engine chunks of 50 ms.
		in := cat(silence(200), tone(300), silence(400), tone(250), silence(300))
		var writes []func(*Writer)
		for i := 0; i < len(in); i += samples(50) {
			end := i + samples(50)
			var words []tts.WordMark
			switch end {
			case samples(500):
				words = []tts.WordMark{{TextEnd: 4, EndSample: samples(500)}} // first word ends
			case samples(1150):
				words = []tts.WordMark{{TextEnd: 9, EndSample: samples(1150)}}
			}
			writes = append(writes, write(in[i:end], words...))
		}
		pcm, marks := joined(collect(t, late, writes...))
		if at := audio.FirstAudible(pcm, rate); at != 0 {
			t.Errorf("late %v: first audible sample at %d, want 0", late, at)
		}
		// 300 tone + 150 pause + 250 tone + 150 tail.
		if want := samples(300 + 150 + 250 + 150); len(pcm) != want {
			t.Errorf("late %v: %d samples out, want %d", late, len(pcm), want)
		}
		// Marks move by exactly what was cut before them: 200 ms, then
		// 200 + 250 ms.
		want := []tts.WordMark{{TextEnd: 4, EndSample: samples(300)}, {TextEnd: 9, EndSample: samples(700)}}
		if len(marks) != 2 || marks[0] != want[0] || marks[1] != want[1] {
			t.Errorf("late %v: marks %+v, want %+v", late, marks, want)
		}
	}
}

// A mark reported in a later, empty Write lands in the held chunk its word
// ended in, at its exact position; a mark inside a cut pause moves to the cut.
func TestLateMarks(t *testing.T) {
	a, b := tone(100), cat(silence(400), tone(100))
	got := collect(t, true,
		write(a),
		write(nil, tts.WordMark{TextEnd: 3, EndSample: samples(60)}),
		write(b, tts.WordMark{TextEnd: 6, EndSample: samples(100 + 300)}),
	)
	// a; the first 150 ms of the pause; the tone after it.
	if len(got) != 3 {
		t.Fatalf("%d chunks, want 3", len(got))
	}
	if len(got[0].Words) != 1 || got[0].Words[0] != (tts.WordMark{TextEnd: 3, EndSample: samples(60)}) {
		t.Errorf("first chunk marks %+v", got[0].Words)
	}
	// The second word's engine end (400 ms) lies in the cut part of the
	// pause (kept: 100..250 ms of output), so it moves to the cut, 250 ms.
	if len(got[1].Words) != 1 || got[1].Words[0].EndSample != samples(250) {
		t.Errorf("second chunk marks %+v, want one at %d", got[1].Words, samples(250))
	}
	if pcm, marks := joined(got); len(marks) != 2 || len(pcm) != samples(100+150+100) {
		t.Errorf("%d samples, marks %+v", len(pcm), marks)
	}
}

// A mark reported after the audio (a remote service's "whole text heard"
// at its last sample), or inside a trailing silence that was cut, is not
// lost: it ends with the last kept sample.
func TestMarkAfterTheAudio(t *testing.T) {
	for _, late := range []bool{false, true} {
		got := collect(t, late,
			write(cat(tone(100), silence(400))),
			write(nil, tts.WordMark{TextEnd: 5, EndSample: samples(500)}),
		)
		pcm, marks := joined(got)
		if want := samples(100 + 150); len(pcm) != want {
			t.Errorf("late %v: %d samples, want %d", late, len(pcm), want)
		}
		if len(marks) != 1 || marks[0] != (tts.WordMark{TextEnd: 5, EndSample: samples(250)}) {
			t.Errorf("late %v: marks %+v, want one at %d", late, marks, samples(250))
		}
	}
}

// Kept audio is the engine's own buffer: no copy.
func TestNoCopy(t *testing.T) {
	in := cat(silence(100), tone(100))
	got := collect(t, false, write(in))
	if len(got) != 1 || unsafe.SliceData(got[0].PCM) != &in[samples(100)] {
		t.Fatalf("output does not alias the input: %d chunks", len(got))
	}
}

func TestSilentTextEmitsNothing(t *testing.T) {
	if got := collect(t, true, write(silence(300), tts.WordMark{TextEnd: 1, EndSample: 10})); len(got) != 0 {
		t.Errorf("%d chunks for silence", len(got))
	}
}

// Buffered lets produce finish (the engine lock released) while nobody
// reads out, and delivers everything afterwards.
func TestBufferedNeverWaitsOnTheConsumer(t *testing.T) {
	out := make(chan tts.Chunk)
	produced := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Buffered(context.Background(), out, Config{SampleRate: rate}, func(w *Writer) error {
			defer close(produced)
			for range 20 {
				if err := w.Write(tone(50), nil); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	<-produced // nobody has read a chunk yet
	n := 0
	for n < samples(1000) {
		n += len((<-out).PCM)
	}
	if err := <-errc; err != nil || n != samples(1000) {
		t.Fatalf("Buffered = %v after %d samples", err, n)
	}
}

func TestBufferedCancelAndErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan tts.Chunk)
	err := Buffered(ctx, out, Config{SampleRate: rate}, func(w *Writer) error {
		if err := w.Write(tone(50), nil); err != nil {
			return err
		}
		cancel()
		return w.Write(tone(50), nil)
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
	errEngine := errors.New("engine broke")
	err = Buffered(context.Background(), out, Config{SampleRate: rate}, func(w *Writer) error {
		_ = w.Write(tone(50), nil)
		return errEngine
	})
	if !errors.Is(err, errEngine) {
		t.Errorf("engine error: %v", err)
	}
}

func BenchmarkWriter(b *testing.B) {
	chunk := tone(50)
	w := NewWriter(Config{SampleRate: rate}, func(tts.Chunk) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		_ = w.Write(chunk, nil)
	}
}
