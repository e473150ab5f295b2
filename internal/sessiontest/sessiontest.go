// Package sessiontest runs a pipeline.Session the way a client does, for
// the tests of backends that need the whole voice loop: a fault in a
// remote backend must end only the turn, with an error event naming the
// backend, while the session goes on. It also has plain stand-ins for the
// two stages a test does not exercise.
package sessiontest

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tts"
)

const (
	rate    = 16000
	frame   = rate / 50 // 20 ms
	frameMs = 20
)

// Config is a session config for tests: 16 kHz in and out, no barge-in
// (the answer's tail never overlaps the next utterance), greedy answers.
func Config() pipeline.Config {
	cfg := pipeline.DefaultConfig()
	cfg.InputRate, cfg.OutputRate = rate, rate
	cfg.BargeIn = false
	cfg.Temperature = 0
	cfg.MaxTokens = 40
	cfg.OutputLeadMs = 100
	cfg.EarlyStart = pipeline.EarlyStartOff
	return cfg
}

// Client drives one session.
type Client struct {
	t      testing.TB
	cfg    pipeline.Config
	in     chan pipeline.Input
	got    chan stamped
	cancel context.CancelFunc
	wg     sync.WaitGroup
	turnN  int
}

type stamped struct {
	o  pipeline.Output
	at time.Time
}

// Start runs a session on be until the test ends.
func Start(t testing.TB, cfg pipeline.Config, be pipeline.Backends) *Client {
	t.Helper()
	sess, err := pipeline.NewSession("test", cfg, be, nil, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	c := &Client{t: t, cfg: cfg, in: make(chan pipeline.Input), got: make(chan stamped, 1<<16)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	out := make(chan pipeline.Output)
	c.wg.Go(func() { _ = sess.Run(ctx, c.in, out) })
	c.wg.Go(func() {
		for {
			select {
			case o := <-out:
				c.got <- stamped{o, time.Now()}
			case <-ctx.Done():
				return
			}
		}
	})
	t.Cleanup(c.Stop)
	return c
}

// Stop ends the session and waits for its goroutines.
func (c *Client) Stop() {
	c.cancel()
	c.wg.Wait()
}

// Turn is what one utterance produced.
type Turn struct {
	Transcript string           // the final transcript
	Answer     string           // the answer's text
	Errors     []pipeline.Event // error events
	Trace      *pipeline.Event  // the turn's trace event (nil: no turn)
	AudioMs    int              // answer audio received
	// SpeechEnd is when the frame completing the endpointing silence was
	// sent; FirstAudio when the first answer frame arrived (zero if none).
	SpeechEnd, FirstAudio time.Time
}

// Heard is FirstAudio − SpeechEnd in milliseconds: the voice-to-voice
// latency without the endpointing wait, as the client sees it.
func (t Turn) Heard() float64 {
	return float64(t.FirstAudio.Sub(t.SpeechEnd)) / float64(time.Millisecond)
}

// ErrorText joins the error events' messages.
func (t Turn) ErrorText() string {
	var s []string
	for _, e := range t.Errors {
		s = append(s, e.Code+": "+e.Message)
	}
	return strings.Join(s, "; ")
}

func (c *Client) send(pcm []int16) {
	select {
	case c.in <- pipeline.Input{Audio: pcm}:
	case <-time.After(10 * time.Second):
		c.t.Fatal("the session does not read its input")
	}
}

// Utterance sends 400 ms of speech-like audio and the endpointing silence
// (faster than real time: the VAD counts frames), then collects output
// until the turn's trace, or until quiet follows an error without a turn.
// realTime paces the audio in 20 ms steps, for backends that stream it on.
func (c *Client) Utterance(realTime bool) Turn {
	c.t.Helper()
	c.turnN++
	quiet := make([]int16, frame)
	send := func(pcm []int16) {
		c.send(pcm)
		if realTime {
			time.Sleep(frameMs * time.Millisecond)
		}
	}
	for range 5 {
		send(append([]int16(nil), quiet...))
	}
	for i := range 20 {
		send(Speech(frame, i*frame))
	}
	silent := c.cfg.VAD.EndSilenceMs / frameMs
	for range silent - 1 {
		send(append([]int16(nil), quiet...))
	}
	var tr Turn
	tr.SpeechEnd = time.Now()
	c.send(append([]int16(nil), quiet...))
	// Keep the session fed with silence while waiting, as a microphone does.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(frameMs * time.Millisecond)
	defer tick.Stop()
	var quietUntil time.Time
	for {
		select {
		case st := <-c.got:
			o := st.o
			if o.Audio != nil {
				if tr.FirstAudio.IsZero() {
					tr.FirstAudio = st.at
				}
				tr.AudioMs += len(o.Audio) * 1000 / c.cfg.OutputRate
				continue
			}
			e := o.Event
			switch e.Type {
			case pipeline.EventTranscript:
				if e.Final {
					tr.Transcript = e.Text
				}
			case pipeline.EventAnswer:
				tr.Answer += e.Text
			case pipeline.EventError:
				tr.Errors = append(tr.Errors, *e)
				quietUntil = time.Now().Add(500 * time.Millisecond)
			case pipeline.EventTrace:
				ev := *e
				tr.Trace = &ev
				return tr
			}
		case <-tick.C:
			if !quietUntil.IsZero() && time.Now().After(quietUntil) {
				return tr // an error and no turn (a failed recognition)
			}
			select {
			case c.in <- pipeline.Input{Audio: make([]int16, frame)}:
			default:
			}
		case <-deadline:
			c.t.Fatalf("utterance %d: no trace within 30 s (errors: %v)", c.turnN, tr.Errors)
			return tr
		}
	}
}

// Speech returns n samples of a 220 Hz tone with 60 ms gaps every 300 ms
// (so the VAD's noise floor does not adapt to it), starting at offset.
func Speech(n, offset int) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pos := offset + i
		amp := 8000.0
		if (pos*1000/rate)%300 >= 240 {
			amp = 0
		}
		pcm[i] = int16(amp * math.Sin(2*math.Pi*220*float64(pos)/rate))
	}
	return pcm
}

// ASR recognises every utterance as Text once it has heard some audio.
type ASR struct{ Text string }

func (a ASR) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate != rate {
		return nil, asr.ErrSampleRate
	}
	return &asrStream{text: a.Text, results: make(chan asr.Result, 2)}, nil
}

type asrStream struct {
	text    string
	n       int
	closed  bool
	results chan asr.Result
}

func (s *asrStream) Write(pcm []int16) error    { s.n += len(pcm); return nil }
func (s *asrStream) Results() <-chan asr.Result { return s.results }
func (s *asrStream) Close() error {
	if !s.closed {
		s.closed = true
		text := ""
		if s.n > 0 {
			text = s.text
		}
		s.results <- asr.Result{Text: text, Final: true, At: time.Now()}
		close(s.results)
	}
	return nil
}

// LLM answers every request with Answer, a word per token.
type LLM struct{ Answer string }

func (m LLM) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	out := make(chan llm.Token, 64)
	go func() {
		defer close(out)
		for _, w := range strings.SplitAfter(m.Answer, " ") {
			select {
			case out <- llm.Token{Text: w}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- llm.Token{Done: true, Usage: &llm.Usage{}}:
		case <-ctx.Done():
		}
	}()
	return out, nil
}

// TTS speaks 40 ms of tone per word, in one chunk per word, at 16 kHz.
type TTS struct{}

func (TTS) SampleRate() int { return rate }

func (TTS) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	off, total := 0, 0
	for _, w := range strings.Fields(text) {
		off = strings.Index(text[off:], w) + off + len(w)
		pcm := make([]int16, 2*frame)
		for i := range pcm {
			pcm[i] = int16(6000 * math.Sin(2*math.Pi*440*float64(i)/rate))
		}
		total += len(pcm)
		select {
		case out <- tts.Chunk{PCM: pcm, Words: []tts.WordMark{{TextEnd: off, EndSample: total}}}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
