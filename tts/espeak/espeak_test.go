//go:build cgo

package espeak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	engine "github.com/voxpipe/voxpipe/cgo/espeak"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/ttstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSynth(t testing.TB, cfg Config) *Synthesizer {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSynthesizeStreamsChunksWithWordMarks(t *testing.T) {
	s := newSynth(t, DefaultConfig())
	if s.SampleRate() != 22050 {
		t.Fatalf("SampleRate = %d, want 22050", s.SampleRate())
	}
	r := ttstest.Synthesize(context.Background(), s, ttstest.Sentence)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Chunks) < 5 {
		t.Errorf("%d chunks for one sentence, want it streamed in several", len(r.Chunks))
	}
	// 16 words at 175 words per minute is ~5.5 s plus pauses.
	if sec := float64(r.Samples) / 22050; sec < 3 || sec > 9 {
		t.Errorf("audio lasts %.2f s for 16 words, want 3-9 s", sec)
	}
	marks := ttstest.CheckMarks(t, ttstest.Sentence, r)
	// espeak joins some unstressed words to the word before ("for a").
	if words := len(strings.Fields(ttstest.Sentence)); len(marks) < words*3/4 || len(marks) > words {
		t.Errorf("%d word marks for %d words", len(marks), words)
	}
	// No end pause: the last word ends with the audio (events are in ms).
	if last := marks[len(marks)-1].EndSample; last < r.Samples-22 {
		t.Errorf("last word ends at sample %d of %d", last, r.Samples)
	}
}

func TestMandarin(t *testing.T) {
	const text = "你好，今天天气很好。我们去公园散步吧。"
	s := newSynth(t, Config{Voice: "cmn", Rate: 175, Pitch: 50})
	r := ttstest.Synthesize(context.Background(), s, text)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if sec := float64(r.Samples) / 22050; sec < 2 || sec > 12 {
		t.Errorf("%.2f s of audio for 17 characters", sec)
	}
	marks := ttstest.CheckMarks(t, text, r)
	if len(marks) < 10 {
		t.Errorf("%d word marks for 17 characters", len(marks))
	}
}

func TestWordMarksFollowTheText(t *testing.T) {
	s := newSynth(t, DefaultConfig())
	r := ttstest.Synthesize(context.Background(), s, ttstest.MarksText)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	marks := ttstest.CheckMarks(t, ttstest.MarksText, r)
	got := ttstest.MarkedWords(ttstest.MarksText, marks)
	want := []string{"Hello", "hello", "The", "test", "the", "real", "test", "costs", "1234", "points", "it", "works"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("marked words %q, want %q", got, want)
	}
}

func TestMultipleUtterancesKeepCounting(t *testing.T) {
	// Timings keep counting across sentences and clauses.
	text := "First sentence here. Second one follows. And a third to finish."
	s := newSynth(t, DefaultConfig())
	r := ttstest.Synthesize(context.Background(), s, text)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	marks := ttstest.CheckMarks(t, text, r)
	if words := len(strings.Fields(text)); len(marks) < words*3/4 || len(marks) > words {
		t.Errorf("%d marks for %d words", len(marks), words)
	}
	// The third sentence ends in the last quarter of the audio, not near
	// the start as it would if each utterance restarted at sample 0.
	if last := marks[len(marks)-1].EndSample; last < r.Samples*3/4 {
		t.Errorf("last word ends at %d of %d samples", last, r.Samples)
	}
}

// TestContract runs the behaviour every synthesizer shares (tts/ttstest).
func TestContract(t *testing.T) {
	ttstest.Contract(t, func(t *testing.T) tts.Synthesizer { return newSynth(t, DefaultConfig()) })
}

func TestUnknownVoice(t *testing.T) {
	for _, voice := range []string{"nosuch", "", "en-xx"} {
		if _, err := New(Config{Voice: voice}); !errors.Is(err, tts.ErrVoice) {
			t.Errorf("New(voice %q) = %v, want tts.ErrVoice", voice, err)
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Voice: "en-us", Rate: 50}, {Voice: "en-us", Rate: 500}, {Voice: "en-us", Pitch: -5}, {Voice: "en-us", Pitch: 101}} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestRateChangesDuration(t *testing.T) {
	samples := map[int]int{}
	for _, rate := range []int{120, 175, 300} {
		r := ttstest.Synthesize(context.Background(), newSynth(t, Config{Voice: "en-us", Rate: rate, Pitch: 50}), ttstest.Sentence)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		samples[rate] = r.Samples
	}
	if samples[120] <= samples[175] || samples[175] <= samples[300] {
		t.Errorf("samples by rate %v, want fewer at higher rates", samples)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if r := ttstest.Synthesize(context.Background(), s, ttstest.Sentence); !errors.Is(r.Err, engine.ErrClosed) {
		t.Errorf("Synthesize after Close = %v, want ErrClosed", r.Err)
	}
}

// TestConcurrentSessions runs many sessions with different voices and rates
// at once; each must get what it gets alone (the engine's one voice and
// parameters are set inside the lock). espeak carries some state from one
// text to the next — after a different voice, up to 7.5% in length was seen
// (21479 samples alone, 23094 concurrently) — so lengths may differ by up
// to 12%, still well under the 25%+ that a wrong rate or voice makes here.
func TestConcurrentSessions(t *testing.T) {
	cfgs := []Config{
		{Voice: "en-us", Rate: 175, Pitch: 50}, {Voice: "en-us", Rate: 300, Pitch: 50},
		{Voice: "en-us", Rate: 120, Pitch: 80}, {Voice: "de", Rate: 175, Pitch: 50},
		{Voice: "cmn", Rate: 200, Pitch: 40}, {Voice: "en-us+f3", Rate: 175, Pitch: 50},
		{Voice: "fr", Rate: 250, Pitch: 60}, {Voice: "cmn", Rate: 150, Pitch: 50},
	}
	texts := []string{"Sure, I can help with that.", "It is twelve degrees outside right now."}
	want := map[string]int{}
	key := func(i, j int) string { return fmt.Sprint(i, "/", j) }
	for i, cfg := range cfgs {
		for j, text := range texts {
			r := ttstest.Synthesize(context.Background(), newSynth(t, cfg), text)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			want[key(i, j)] = r.Samples
		}
	}
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		s := newSynth(t, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 2; round++ {
				for j, text := range texts {
					r := ttstest.Synthesize(context.Background(), s, text)
					if r.Err != nil {
						t.Errorf("%+v: %v", cfg, r.Err)
						return
					}
					if w := want[key(i, j)]; r.Samples < w*88/100 || r.Samples > w*112/100 {
						t.Errorf("%+v %q: %d samples concurrently, %d alone", cfg, text, r.Samples, want[key(i, j)])
					}
					ttstest.CheckMarks(t, text, r)
				}
			}
		}()
	}
	wg.Wait()
}
