//go:build cgo

package pipeline

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	ttsespeak "github.com/voxpipe/voxpipe/tts/espeak"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// spokenBy synthesizes text with synth and returns it at 16 kHz.
func spokenBy(t *testing.T, synth tts.Synthesizer, text string) []int16 {
	t.Helper()
	ch := make(chan tts.Chunk, 16)
	errc := make(chan error, 1)
	go func() { errc <- synth.Synthesize(context.Background(), text, ch); close(ch) }()
	var pcm []int16
	for c := range ch {
		pcm = append(pcm, c.PCM...)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if synth.SampleRate() == asrRate {
		return pcm
	}
	rs, err := audio.NewResampler(synth.SampleRate(), asrRate)
	if err != nil {
		t.Fatal(err)
	}
	out := rs.Process(nil, pcm)
	return append(out, rs.Flush(nil)...)
}

// heldOutcome applies the hub's rule for speech over an answer to what the
// recogniser made of it: it interrupts when a partial has a stop word, the
// final is no backchannel, or the speech is voiced for max_ms.
func heldOutcome(bc *backchannels, partials []string, final string, voicedMs int) bool {
	for _, p := range partials {
		if bc.stopped(p) {
			return true
		}
	}
	if strings.TrimSpace(final) != "" && !bc.is(final) {
		return true
	}
	return voicedMs >= bc.maxMs
}

// TestBackchannelsWithPocketsphinx: acknowledgements and interruptions
// spoken by flite (slt; with VOXPIPE_BACKCHANNEL_VOICES=all also rms, awb,
// kal16 and espeak-ng), recognised by pocketsphinx as a session would
// (streamed in 20 ms frames, partials and the final), and judged by the
// hub's rule with the default words: every interruption must cut, and at
// most 40% of the acknowledgements (pocketsphinx hears flite's "Mhm." as
// "an age and", its "Sure." as "share").
func TestBackchannelsWithPocketsphinx(t *testing.T) {
	if testing.Short() {
		t.Skip("short: decodes 14 utterances with pocketsphinx")
	}
	rec, err := sphinx.New(sphinx.DefaultConfig())
	if err != nil {
		t.Skipf("pocketsphinx unavailable: %v", err)
	}
	defer rec.Close()
	voices := []string{"slt"}
	all := os.Getenv("VOXPIPE_BACKCHANNEL_VOICES") == "all"
	if all {
		voices = append(voices, "rms", "awb", "kal16")
	}
	var synths []tts.Synthesizer
	for _, v := range voices {
		s, err := ttsflite.New(ttsflite.Config{Voice: v, Rate: 1})
		if err != nil {
			t.Skipf("flite unavailable: %v", err)
		}
		defer s.Close()
		synths = append(synths, s)
	}
	if s, err := ttsespeak.New(ttsespeak.Config{Voice: "en-us", Rate: 175, Pitch: 50}); all && err == nil {
		defer s.Close()
		synths = append(synths, s)
	}
	bc, err := newBackchannels(BackchannelConfig{Words: DefaultBackchannels(), StopWords: DefaultStopWords()})
	if err != nil {
		t.Fatal(err)
	}
	acks := []string{"Mhm.", "Uh-huh.", "Yeah.", "Okay.", "Right.", "Yes.", "Sure.", "I see."}
	stops := []string{"Stop.", "Wait.", "Stop please.", "Wait a second.", "What about tomorrow?", "No, that is wrong."}
	count := func(texts []string) (cut, n int) {
		for _, synth := range synths {
			for _, text := range texts {
				pcm := append(make([]int16, asrRate*3/10), spokenBy(t, synth, text)...)
				pcm = append(pcm, make([]int16, asrRate*6/10)...)
				partials, final, err := decodeStream(rec, pcm)
				if err != nil {
					t.Fatal(err)
				}
				voiced := 0
				for i := 0; i+320 <= len(pcm); i += 320 {
					if frameEnergy(pcm[i:i+320]) > 1e5 { // -40 dBFS
						voiced += frameMs
					}
				}
				interrupts := heldOutcome(bc, partials, final, voiced)
				t.Logf("%-22q -> partials %q final %q, voiced %d ms: interrupts %v", text, partials, final, voiced, interrupts)
				n++
				if interrupts {
					cut++
				}
			}
		}
		return cut, n
	}
	ackCut, ackN := count(acks)
	stopCut, stopN := count(stops)
	t.Logf("backchannels interrupt %d of %d (%.0f%%); stop/wait/questions %d of %d (%.0f%%)",
		ackCut, ackN, 100*float64(ackCut)/float64(ackN), stopCut, stopN, 100*float64(stopCut)/float64(stopN))
	if stopCut < stopN {
		t.Errorf("%d of %d interruptions would not cut the answer", stopN-stopCut, stopN)
	}
	if 10*ackCut > 4*ackN {
		t.Errorf("%d of %d acknowledgements would cut the answer, want at most 40%%", ackCut, ackN)
	}
}

// decodeStream streams pcm through r in 20 ms frames and returns the
// partials in order and the final.
func decodeStream(r *sphinx.Recognizer, pcm []int16) (partials []string, final string, err error) {
	st, err := r.Start(context.Background(), asrRate)
	if err != nil {
		return nil, "", err
	}
	take := func(block bool) {
		for {
			if block {
				res, ok := <-st.Results()
				if !ok {
					return
				}
				if res.Final {
					final = res.Text
				} else {
					partials = append(partials, res.Text)
				}
				continue
			}
			select {
			case res, ok := <-st.Results():
				if !ok {
					return
				}
				if res.Final {
					final = res.Text
				} else {
					partials = append(partials, res.Text)
				}
			default:
				return
			}
		}
	}
	for i := 0; i+320 <= len(pcm); i += 320 {
		if err := st.Write(pcm[i : i+320]); err != nil {
			return nil, "", err
		}
		take(false)
	}
	if err := st.Close(); err != nil {
		return nil, "", err
	}
	take(true)
	return partials, final, nil
}
