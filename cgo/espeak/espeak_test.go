//go:build cgo

package espeak

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewUnknownVoice(t *testing.T) {
	for _, voice := range []string{"", "xx-nowhere"} {
		if _, err := New(voice); !errors.Is(err, ErrVoice) {
			t.Errorf("New(%q) = %v, want ErrVoice", voice, err)
		}
	}
	// A failed switch must not leave the engine without a voice.
	sp, err := New("en-us")
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Synthesize(context.Background(), "Still fine.", Options{}, func([]int16, []WordMark) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsOutOfRange(t *testing.T) {
	sp, err := New("en-us")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{Rate: 79}, {Rate: 451}, {Pitch: -1}, {Pitch: 101}} {
		if err := sp.Synthesize(context.Background(), "x", o, nil); !errors.Is(err, ErrOptions) {
			t.Errorf("options %+v: %v, want ErrOptions", o, err)
		}
	}
}

// TestAbortThenSpeak stops a long text from the emit callback, then checks
// that the next text's timings start from zero again.
func TestAbortThenSpeak(t *testing.T) {
	sp, err := New("en-us")
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	errStop := errors.New("stop here")
	calls := 0
	long := strings.Repeat("A long text that will not be finished. ", 30)
	err = sp.Synthesize(context.Background(), long, Options{}, func([]int16, []WordMark) error {
		calls++
		if calls == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 3 {
		t.Fatalf("Synthesize = %v after %d chunks, want errStop after 3", err, calls)
	}
	samples := 0
	var marks []WordMark
	err = sp.Synthesize(context.Background(), "Three more words.", Options{}, func(pcm []int16, words []WordMark) error {
		samples += len(pcm)
		marks = append(marks, words...)
		return nil
	})
	if err != nil || len(marks) != 3 {
		t.Fatalf("after an abort: err %v, marks %+v", err, marks)
	}
	if first := marks[0].EndSample; first > samples/2 {
		t.Errorf("first word ends at %d of %d samples: timings did not restart", first, samples)
	}
	if last := marks[2]; last.TextEnd != len("Three more words") || last.EndSample > samples || last.EndSample < samples-22 {
		t.Errorf("last mark %+v for %d samples", last, samples)
	}
}
