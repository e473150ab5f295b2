package stream

import (
	"context"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
)

// Config describes the engine's output.
type Config struct {
	SampleRate int
	// LateMarks says the engine may report a word in a later Write than the
	// one carrying the end of its audio (flite and espeak close a word when
	// the next one starts, sometimes in a callback with no audio). The
	// Writer then holds each piece of audio back until the next Write with
	// audio, or Close, so every mark lands in the chunk its word ends in.
	// That costs one engine callback of delay (~1 ms for flite).
	LateMarks bool
}

// Writer shapes one synthesis (see the package comment) and hands the
// result, chunk by chunk, to its sink. It is used by one goroutine at a
// time; a new synthesis needs a new Writer.
type Writer struct {
	sink     func(tts.Chunk) error
	rate     int
	win      int // audibility window, samples
	maxPause int // samples
	late     bool

	in    int  // engine samples written so far
	out   int  // samples kept so far (emitted and held)
	run   int  // samples in the current run of silent windows
	spoke bool // an audible window has been kept
	// dropped lists the removed stretches of engine samples, in order, so a
	// mark anywhere in the synthesis moves by exactly what went before it.
	dropped []span

	held      tts.Chunk // LateMarks: the last kept piece, not yet emitted
	heldStart int       // its first output sample
	hasHeld   bool
	waiting   []tts.WordMark // marks for the next piece emitted (output positions)
	kept      []span         // scratch: kept stretches of the current Write
	pieces    []tts.Chunk    // scratch: their chunks
}

// span is the half-open stretch [from, to) of samples.
type span struct{ from, to int }

// NewWriter returns a Writer that passes shaped chunks to sink, which may
// block (it is called on the writing goroutine) and whose error Write
// returns.
func NewWriter(cfg Config, sink func(tts.Chunk) error) *Writer {
	return &Writer{
		sink:     sink,
		rate:     cfg.SampleRate,
		win:      audio.AudibleWindow(cfg.SampleRate),
		maxPause: int(MaxPause.Seconds() * float64(cfg.SampleRate)),
		late:     cfg.LateMarks,
	}
}

// Write takes the engine's next pcm (ownership passes: kept runs go out as
// sub-slices of it) and the words whose audio ended by its end, with
// EndSample counted in engine samples from the start of the synthesis. pcm
// may be empty when the engine reports words only.
func (w *Writer) Write(pcm []int16, words []tts.WordMark) error {
	outStart := w.out
	w.keep(pcm)
	w.in += len(pcm)

	// Each kept stretch becomes a piece whose output span is
	// (start, start+len]; marks go to the piece their word ends in.
	pieces := w.pieces[:0]
	for _, k := range w.kept {
		pieces = append(pieces, tts.Chunk{PCM: pcm[k.from:k.to]})
	}
	w.pieces = pieces
	defer clear(pieces) // drop the references once emitted or held
	for _, m := range words {
		m.EndSample = min(w.toOut(m.EndSample), w.out)
		switch {
		case m.EndSample <= outStart && w.hasHeld && m.EndSample > w.heldStart:
			w.held.Words = append(w.held.Words, m) // ends in the held piece
		case m.EndSample <= outStart || len(pieces) == 0:
			w.waiting = append(w.waiting, m) // for the next piece emitted
		default:
			at, start := 0, outStart
			for at < len(pieces)-1 && m.EndSample > start+len(pieces[at].PCM) {
				start += len(pieces[at].PCM)
				at++
			}
			pieces[at].Words = append(pieces[at].Words, m)
		}
	}
	if len(pieces) == 0 {
		return nil
	}
	if w.late {
		if w.hasHeld {
			if err := w.emit(w.held, w.heldStart); err != nil {
				return err
			}
		}
		last := len(pieces) - 1
		w.held, w.hasHeld = pieces[last], true
		w.heldStart = w.out - len(pieces[last].PCM)
		pieces = pieces[:last]
	}
	start := outStart
	for _, p := range pieces {
		if err := w.emit(p, start); err != nil {
			return err
		}
		start += len(p.PCM)
	}
	return nil
}

// Close emits the held piece. Marks still waiting for audio (reported
// after the last kept sample, e.g. with trailing silence that was cut) end
// with the last kept sample, in a chunk of their own; marks of a text with
// no audible speech are dropped.
func (w *Writer) Close() error {
	if w.hasHeld {
		w.hasHeld = false
		return w.emit(w.held, w.heldStart)
	}
	if len(w.waiting) == 0 || w.out == 0 {
		return nil
	}
	return w.emit(tts.Chunk{}, w.out)
}

// emit sends piece c, whose first sample is output sample start, with the
// marks that were waiting for audio clamped into its span.
func (w *Writer) emit(c tts.Chunk, start int) error {
	if len(w.waiting) > 0 {
		end := start + len(c.PCM)
		words := make([]tts.WordMark, 0, len(w.waiting)+len(c.Words))
		for _, m := range w.waiting {
			m.EndSample = min(max(m.EndSample, start+1), end)
			words = append(words, m)
		}
		c.Words = append(words, c.Words...)
		w.waiting = w.waiting[:0]
	}
	return w.sink(c)
}

// keep decides, window by window, which samples of pcm stay, filling
// w.kept with the kept stretches (indices into pcm) and w.dropped with the
// removed ones (engine positions); w.out grows by the kept samples.
func (w *Writer) keep(pcm []int16) {
	w.kept = w.kept[:0]
	for a := 0; a < len(pcm); a += w.win {
		b := min(a+w.win, len(pcm))
		keep := true
		if audio.IsAudible(pcm[a:b], w.rate) {
			w.run, w.spoke = 0, true
		} else {
			w.run += b - a
			keep = w.spoke && w.run <= w.maxPause
		}
		if keep {
			w.out += b - a
			if n := len(w.kept); n > 0 && w.kept[n-1].to == a {
				w.kept[n-1].to = b
			} else {
				w.kept = append(w.kept, span{a, b})
			}
			continue
		}
		from, to := w.in+a, w.in+b
		if n := len(w.dropped); n > 0 && w.dropped[n-1].to == from {
			w.dropped[n-1].to = to
		} else {
			w.dropped = append(w.dropped, span{from, to})
		}
	}
}

// toOut maps an engine sample position to the output: minus every removed
// sample before it; a position inside a removed stretch maps to where the
// stretch was cut out.
func (w *Writer) toOut(pos int) int {
	out := pos
	for _, d := range w.dropped {
		if d.from >= pos {
			break
		}
		out -= min(d.to, pos) - d.from
	}
	return out
}

// Send returns a sink for NewWriter that sends each chunk to out, giving
// way to ctx: for backends that hold no engine lock while they write.
func Send(ctx context.Context, out chan<- tts.Chunk) func(tts.Chunk) error {
	return func(c tts.Chunk) error {
		select {
		case out <- c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
