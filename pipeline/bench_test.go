package pipeline

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// speechLike returns n samples at rate of a 220 Hz tone whose loudness
// follows 240 ms "words" and 60 ms dips, so the VAD stays in one utterance
// (the dips are shorter than the endpointing silence, and they keep its
// noise-floor tracker from taking the tone for steady noise).
func speechLike(n, rate, offset int) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pos := offset + i
		amp := 8000.0
		if (pos*1000/rate)%300 >= 240 {
			amp = 0
		}
		pcm[i] = int16(amp * math.Sin(2*math.Pi*220*float64(pos)/float64(rate)))
	}
	return pcm
}

// utteranceAudio returns 240 ms of speechLike audio at rate whose last
// frame fades out, so that no filter ringing lengthens it: the VAD then ends
// the utterance on exactly the EndSilenceMs/20th silent frame after it.
func utteranceAudio(rate int) []int16 {
	n := rate * frameMs / 1000
	pcm := speechLike(12*n, rate, 0)
	last := pcm[11*n:]
	for i := range last {
		last[i] = int16(float64(last[i]) * float64(n-i) / float64(n))
	}
	return pcm
}

// BenchmarkAudioInFrame pushes 20 ms frames at 48 kHz (and at 16 kHz, no
// resampling) through the audio-in chain (resample → framer → VAD → ASR
// queue, and the pitch tracker with intonation on); one op is one frame. The goal is 0 allocs/op in steady state.
func BenchmarkAudioInFrame(b *testing.B) {
	for _, rate := range []int{48000, 16000} {
		for _, kind := range []string{"silence", "speech", "semantic", "intonation"} {
			b.Run(kind+"/"+strconv.Itoa(rate), func(b *testing.B) { benchAudioIn(b, kind, rate) })
		}
	}
}

func benchAudioIn(b *testing.B, kind string, rate int) {
	cfg := testConfig()
	cfg.InputRate = rate
	cfg, _ = cfg.validate(Backends{ASR: &fakeASR{}, LLM: &scriptedLLM{}, TTS: &toneTTS{rate: 16000}})
	a, err := newAudioIn(cfg, nopObserver{}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	if kind == "semantic" || kind == "intonation" { // speech with the end-of-turn check on every frame (a wait never reached)
		var w endWait
		w.store(1, time.Hour, 0)
		tc := endturn.DefaultConfig()
		if kind == "intonation" { // and the pitch of every speech frame followed
			tc.IntonationYield = 0.7
		}
		a.semantic(&w, tc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	toASR := make(chan asrCmd, asrQueueFrames)
	toHub := make(chan inputEvent, 16)
	a.ctx, a.toASR, a.toHub = ctx, toASR, toHub
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { // the ASR stage and the hub: take and forget
		for {
			select {
			case <-toASR:
			case <-toHub:
			case <-ctx.Done():
				return
			}
		}
	})
	frame := rate * frameMs / 1000
	// One second of input cycled, so the signal's phase keeps moving.
	src := make([]int16, rate)
	if kind != "silence" {
		src = speechLike(len(src), rate, 0)
	}
	for i := 0; i < 100; i++ { // warm up: buffers at size, VAD settled
		a.write(src[(i%50)*frame : (i%50+1)*frame])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.write(src[(i%50)*frame : (i%50+1)*frame])
	}
	b.StopTimer()
	if a.err != nil {
		b.Fatal(a.err)
	}
	if kind != "silence" && !a.vad.InSpeech() {
		b.Fatal("the VAD is not in speech: the benchmark measures the wrong path")
	}
}

// BenchmarkTurnOverhead measures the session's own latency with instant
// backends: from the input message that completes the endpointing silence
// (the VAD's SpeechEnd frame) to the first answer frame handed to out. That
// is the time from the last audio frame of the utterance to the first answer
// frame minus the configured endpointing wait, i.e. pure pipeline overhead
// (goal < 2 ms). Speech and silence arrive faster than real time; the
// benchmark checks that no answer frame came before the SpeechEnd frame.
func BenchmarkTurnOverhead(b *testing.B) {
	m := &scriptedLLM{scripts: []llmScript{answer("Hi.")}}
	defer m.wg.Wait()
	be := Backends{ASR: &fakeASR{transcripts: []string{"hello"}, minFrames: 1}, LLM: m, TTS: &toneTTS{rate: 48000, wordMs: 20}}
	// Let the simulated client play the answer's 20 ms: otherwise the
	// pacer, rightly, holds the next answer back behind the last one.
	overheads := runTurns(b, be, frameDur)
	var sum float64
	for _, v := range overheads {
		sum += v
	}
	b.ReportMetric(sum/float64(len(overheads)), "overhead_ms")
	b.ReportMetric(overheads[len(overheads)/2], "p50_ms")
	b.ReportMetric(overheads[len(overheads)*99/100], "p99_ms")
}

// BenchmarkAnswerTokens streams one long answer through the per-token path
// (LLM stage → chunker → turn manager → answer event → out, and chunks to
// a TTS that returns word marks without audio); one op is one token.
func BenchmarkAnswerTokens(b *testing.B) {
	cfg := testConfig()
	cfg.BargeIn = false
	words := make([]string, b.N)
	for i := range words {
		words[i] = " word"
		if i%12 == 11 {
			words[i] = " end."
		}
	}
	a := &fakeASR{transcripts: []string{"talk"}, minFrames: 1}
	m := &scriptedLLM{scripts: []llmScript{{tokens: words, failAt: -1}}}
	s := &toneTTS{rate: 48000, wordMs: 0}
	sess, err := NewSession("bench", cfg, Backends{ASR: a, LLM: m, TTS: s}, nil, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	in := make(chan Input)
	out := make(chan Output)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = sess.Run(ctx, in, out) })
	defer func() {
		cancel()
		wg.Wait()
		m.wg.Wait()
	}()
	n := cfg.InputRate * frameMs / 1000
	speech := utteranceAudio(cfg.InputRate)
	wg.Go(func() {
		for f := 0; f < 12+cfg.VAD.EndSilenceMs/frameMs; f++ {
			pcm := make([]int16, n)
			if f < 12 {
				copy(pcm, speech[f*n:])
			}
			select {
			case in <- Input{Audio: pcm}:
			case <-ctx.Done():
				return
			}
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for {
		o := <-out
		if o.Event != nil && o.Event.Type == EventTrace {
			break
		}
	}
	b.StopTimer()
}
