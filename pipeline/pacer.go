package pipeline

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// frameDur is the length of every output frame.
const frameDur = frameMs * time.Millisecond

// queuedFrame is one entry of the pacer's queue: a 20 ms frame, or the end
// of a turn's audio.
type queuedFrame struct {
	t   *turn
	pcm []int16
	end bool
}

// pacer is the only writer of out. It keeps its own queue of frames (so the
// TTS side never waits on the real-time clock), sends them at real-time
// pace with a time.Ticker, at most OutputLeadMs ahead of the client's
// playback, and sends the events the turn manager hands it.
//
// It sends audio only while a turn speaks: nothing between turns and no
// silence on underflow. A client's played_ms then counts exactly the
// samples it got, which is what the barge-in accounting needs; a transport
// that needs a continuous stream (RTP) pads silence itself.
type pacer struct {
	cfg      Config
	obs      Observer
	log      zerolog.Logger
	frameLen int
	lead     time.Duration

	queue       []queuedFrame
	head        int
	partial     []int16 // a frame being filled across pacedAudio messages
	partialTurn *turn
	// due is when the client will have played everything sent so far, if it
	// plays as it receives; a frame may go out while due-now <= lead.
	due         time.Time
	ticker      *time.Ticker
	ticking     bool
	formatSent  bool
	flushedUpTo int // turns with an id up to this were cut: drop their audio
	audibleUpTo int // turns with an id up to this have first_audible_out

	out     chan<- Output
	reports chan<- pacerReport
	// echo, when the session cancels echo, is told every frame sent
	// (echo.go).
	echo *echoTap
}

func newPacer(cfg Config, obs Observer, log zerolog.Logger) *pacer {
	return &pacer{
		cfg:      cfg,
		obs:      obs,
		log:      log,
		frameLen: cfg.OutputRate * frameMs / 1000,
		lead:     time.Duration(cfg.OutputLeadMs) * time.Millisecond,
	}
}

func (p *pacer) run(ctx context.Context, audioIn <-chan pacedAudio, ctl <-chan outCtl, out chan<- Output, reports chan<- pacerReport) error {
	defer close(reports)
	p.out, p.reports = out, reports
	p.ticker = time.NewTicker(frameDur)
	p.ticker.Stop()
	defer p.ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-audioIn:
			if !ok {
				audioIn = nil
				continue
			}
			p.enqueue(m)
		case c, ok := <-ctl:
			if !ok {
				ctl = nil
				continue
			}
			if err := p.control(ctx, c); err != nil {
				return err
			}
		case <-p.ticker.C:
		}
		if err := p.pump(ctx); err != nil {
			return err
		}
	}
}

// enqueue cuts m's audio into frames. Whole frames are sub-slices of m.pcm
// (no copy; each frame's ownership passes to the transport on its own);
// only a frame straddling two messages is copied.
func (p *pacer) enqueue(m pacedAudio) {
	t := m.t
	if t.id <= p.flushedUpTo || t.dropped {
		return
	}
	t.words = append(t.words, m.marks...)
	pcm := m.pcm
	if p.partial != nil && p.partialTurn == t {
		n := copy(p.partial[len(p.partial):p.frameLen], pcm)
		p.partial = p.partial[:len(p.partial)+n]
		pcm = pcm[n:]
		if len(p.partial) == p.frameLen {
			p.queue = append(p.queue, queuedFrame{t: t, pcm: p.partial})
			p.partial, p.partialTurn = nil, nil
		}
	}
	for len(pcm) >= p.frameLen {
		p.queue = append(p.queue, queuedFrame{t: t, pcm: pcm[:p.frameLen:p.frameLen]})
		pcm = pcm[p.frameLen:]
	}
	if len(pcm) > 0 {
		p.partial = append(make([]int16, 0, p.frameLen), pcm...)
		p.partialTurn = t
	}
	if m.end {
		if p.partial != nil && p.partialTurn == t {
			n := len(p.partial)
			p.partial = p.partial[:p.frameLen] // the tail, padded with zeros
			clear(p.partial[n:])
			p.queue = append(p.queue, queuedFrame{t: t, pcm: p.partial})
			p.partial, p.partialTurn = nil, nil
		}
		p.queue = append(p.queue, queuedFrame{t: t, end: true})
	}
}

// pump sends every frame the lead allows, finishes turns whose last frame
// went out, and runs the ticker only while frames wait.
func (p *pacer) pump(ctx context.Context) error {
	for p.head < len(p.queue) {
		q := p.queue[p.head]
		if q.t.committed != nil && !q.t.released {
			break // a speculative answer's audio waits for the commit
		}
		if q.end {
			p.pop()
			if err := p.end(ctx, q.t, reportEnded); err != nil {
				return err
			}
			continue
		}
		now := time.Now()
		if p.due.Sub(now) > p.lead {
			break
		}
		if !p.formatSent {
			p.formatSent = true
			ev := &Event{Type: EventAudio, Encoding: "pcm16", SampleRate: p.cfg.OutputRate, FrameMs: frameMs}
			if err := p.send(ctx, Output{Event: ev}); err != nil {
				return err
			}
		}
		if p.echo != nil {
			// Before the send, which hands the frame to the transport.
			p.echo.sent(q.pcm, later(p.due, now))
		}
		// The marks below take now, from before the send: the client may
		// answer the frame (playback_start) before this goroutine runs again.
		if err := p.send(ctx, Output{Audio: q.pcm}); err != nil {
			return err
		}
		p.pop()
		if !q.t.firstOut {
			q.t.firstOut = true
			q.t.trace.markAt(MarkFirstAudioOut, now)
		}
		// Checked only until the turn's first audible frame: a frame or two.
		if q.t.id > p.audibleUpTo && audio.IsAudible(q.pcm, p.cfg.OutputRate) {
			p.audibleUpTo = q.t.id
			q.t.trace.markAt(MarkFirstAudibleOut, now)
		}
		q.t.sentSamples += len(q.pcm)
		q.t.sentOut.Add(int64(len(q.pcm)))
		p.due = later(p.due, now).Add(frameDur)
	}
	held := p.head < len(p.queue) && p.queue[p.head].t.committed != nil && !p.queue[p.head].t.released
	switch waiting := p.head < len(p.queue) && !held; {
	case waiting && !p.ticking:
		p.ticker.Reset(frameDur)
		p.ticking = true
	case !waiting && p.ticking:
		p.ticker.Stop()
		p.ticking = false
	}
	return nil
}

func (p *pacer) pop() {
	p.queue[p.head] = queuedFrame{}
	p.head++
	if p.head == len(p.queue) {
		p.queue, p.head = p.queue[:0], 0
	}
}

// control sends an event or a trace, or flushes a cut turn.
func (p *pacer) control(ctx context.Context, c outCtl) error {
	switch {
	case c.event != nil:
		return p.send(ctx, Output{Event: c.event})
	case c.trace != nil:
		return p.sendTrace(ctx, c.trace)
	case c.release != nil:
		c.release.released = true
		return nil
	case c.discard != nil:
		t := c.discard
		t.dropped = true
		p.drop(t)
		return nil
	}
	t := c.flush
	p.drop(t)
	p.flushedUpTo = max(p.flushedUpTo, t.id)
	// What the client still holds: the lead in use (also after the last
	// frame, while the client plays it out).
	t.unplayed = max(0, int(time.Until(p.due).Seconds()*float64(p.cfg.OutputRate)))
	if c.clientStopped {
		p.due = time.Time{} // the client dropped what it held
		if p.echo != nil {
			p.echo.flushed(time.Now())
		}
	}
	if c.notify {
		if err := p.send(ctx, Output{Event: &Event{Type: EventInterrupted, Turn: t.id}}); err != nil {
			return err
		}
	}
	return p.end(ctx, t, reportFlushed)
}

// drop removes t's queued audio.
func (p *pacer) drop(t *turn) {
	kept := p.queue[:p.head]
	for _, q := range p.queue[p.head:] {
		if q.t != t {
			kept = append(kept, q)
		}
	}
	clear(p.queue[len(kept):])
	p.queue = kept
	if p.partialTurn == t {
		p.partial, p.partialTurn = nil, nil
	}
}

// end marks turn_end (once per turn) and reports to the turn manager; after
// the report the pacer no longer touches t's pacer-owned fields.
func (p *pacer) end(ctx context.Context, t *turn, kind pacerReportKind) error {
	if !t.ended {
		t.ended = true
		t.trace.mark(MarkTurnEnd)
		p.log.Debug().Int("sent_samples", t.sentSamples).Bool("flushed", kind == reportFlushed).Msg("turn audio ended")
	}
	return sendCtx(ctx, p.reports, pacerReport{t: t, kind: kind})
}

// sendTrace sends the turn's trace event and hands the trace to the Observer.
func (p *pacer) sendTrace(ctx context.Context, t *turn) error {
	tr := t.trace.snapshot()
	ev := tr.Event()
	ev.Turn = t.id
	p.obs.TurnTraced(tr) // first: whoever sees the event may read the metrics
	return p.send(ctx, Output{Event: ev})
}

func (p *pacer) send(ctx context.Context, o Output) error {
	select {
	case p.out <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
