package pipeline

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// asrQueueFrames bounds the audio waiting for the ASR stage: 3 s. When it is
// full, frames are dropped (counted as asr_queue_full) rather than stall the
// audio clock. pocketsphinx has taken up to 237 ms on a single 20 ms chunk
// (voice-engines.md §5) and falls behind real time while other sessions
// share the cores, so 1 s dropped speech under load; 3 s costs 96 KB.
const asrQueueFrames = 150

// asrQueueReserve slots are kept free for asrStart, asrResume and asrEnd,
// which are never dropped.
const asrQueueReserve = 3

// audioIn is the audio-in stage: the synchronous chain
// resample(InputRate→16k) → framer(20 ms) → VAD, then frames to the ASR
// stage. It also reads the client's control events. It owns every buffer it
// uses; in steady state it allocates nothing per frame.
type audioIn struct {
	cfg Config
	obs Observer
	log zerolog.Logger

	rs     *audio.Resampler // nil when the input is already 16 kHz
	rsBuf  []int16
	framer *audio.Framer
	vad    *audio.VAD
	emit   func(frame []int16) // onFrame, bound once
	// clean cancels echo and suppresses noise before the VAD (echo.go);
	// nil when the session does neither.
	clean *micCleaner

	// ring holds the frames in flight to the ASR stage. It has
	// asrQueueFrames+2 slots: the queue holds at most asrQueueFrames and the
	// ASR stage works on one, so the slot written next is never in use.
	ring     [][]int16
	ringNext int

	startFrames    int // speech frames already behind a SpeechStart
	endFrames      int // non-speech frames already behind a SpeechEnd
	bargeInFrames  int // speech frames before a barge-in report
	maxTurnFrames  int // an utterance is ended after this many frames; 0 = no limit
	preRollSamples int

	// The audio clock: when each of the last frames arrived (the end of its
	// audio, as near as the transport tells), so that speech_start and
	// speech_end say when the person started and stopped speaking, not when
	// the VAD became sure of it (StartMs and EndSilenceMs later).
	arrived    time.Time   // the Input message being processed
	frameTimes []time.Time // ring, indexed by frameCount
	frameCount int

	// The semantic end of turn (eou.go): nil in silence mode.
	endWait      *endWait
	minEndFrames int // the earliest an utterance may end: MinSilenceMs
	pauseFrames  int // silence that counts as a pause (speculative answers)
	finalFrames  int // a pause this long gets the recogniser's final (Config.PauseFinalMs); 0 = by score only
	pauseSent    bool
	pauseSeq     int
	splitSent    bool // an asrSplit went out for this pause (Config.PauseFinal)
	// The intonation before a pause (Turn.IntonationCue): nil when the
	// policy does not listen to it. cue is the current pause's, in
	// log-odds added to the text's score.
	into *audio.Intonation
	// speakers gets the speaker's pitch profile when run ends (recallSpeaker).
	speakers *SpeakerMemory
	turnCfg  endturn.Config
	contour  audio.Contour
	cue      float64

	// Per utterance.
	uttSeq       int
	utt          *traceRec
	speechFrames int
	bargeSent    bool
	// With backchannels (backchannel.go): voiced frames of the utterance,
	// and whether inputLongSpeech went out at longFrames (0: never sent).
	voicedFrames, longFrames int
	longSent                 bool

	// Set for the duration of run; onFrame reports a failed send in err.
	ctx   context.Context
	toASR chan<- asrCmd
	toHub chan<- inputEvent
	err   error
}

func newAudioIn(cfg Config, obs Observer, log zerolog.Logger) (*audioIn, error) {
	a := &audioIn{cfg: cfg, obs: obs, log: log}
	if cfg.InputRate != asrRate {
		rs, err := audio.NewResampler(cfg.InputRate, asrRate)
		if err != nil {
			return nil, fmt.Errorf("%w: input rate: %w", ErrConfig, err)
		}
		a.rs = rs
		a.rsBuf = make([]int16, 0, rs.MaxOutput(cfg.InputRate/10))
	}
	vad, err := audio.NewVAD(cfg.VAD)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	a.vad = vad
	frameSamples := asrRate * frameMs / 1000
	a.framer = audio.NewFramer(frameSamples)
	a.ring = make([][]int16, asrQueueFrames+2)
	for i := range a.ring {
		a.ring[i] = make([]int16, frameSamples)
	}
	a.startFrames = max(1, (cfg.VAD.StartMs+frameMs-1)/frameMs)
	a.endFrames = max(1, (cfg.VAD.EndSilenceMs+frameMs-1)/frameMs)
	a.frameTimes = make([]time.Time, max(a.startFrames, a.endFrames)+1)
	a.bargeInFrames = max(1, (cfg.BargeInMinSpeechMs+frameMs-1)/frameMs)
	if len(cfg.Backchannel.Words) > 0 && cfg.BargeIn {
		ms := cfg.Backchannel.MaxMs
		if ms == 0 {
			ms = DefaultBackchannelMaxMs
		}
		a.longFrames = max(1, ms/frameMs)
	}
	if cfg.MaxTurn > 0 {
		a.maxTurnFrames = max(1, int(cfg.MaxTurn/frameDur))
	}
	a.preRollSamples = asrRate*(cfg.VAD.PreRollMs+cfg.VAD.StartMs)/1000 + frameSamples
	a.emit = a.onFrame
	return a, nil
}

// pauseMs of silence inside an utterance is a pause: the turn manager may
// start a speculative answer (three frames: shorter gaps are the stops
// inside and between words).
const pauseMs = 60

// semantic turns on the semantic end of turn: audio-in ends an utterance
// once its silence reaches the wait published in w.
func (a *audioIn) semantic(w *endWait, c endturn.Config) {
	a.endWait = w
	a.minEndFrames = max(1, (c.MinSilenceMs+frameMs-1)/frameMs)
	a.pauseFrames = max(1, pauseMs/frameMs)
	if a.cfg.PauseFinalMs > 0 { // validate zeroes it without PauseFinal
		a.finalFrames = max(a.pauseFrames, (a.cfg.PauseFinalMs+frameMs-1)/frameMs)
	}
	a.turnCfg = c
	if c.IntonationYield != 0 || c.IntonationHold != 0 {
		// 20 ms frames at 16 kHz always fit the tracker.
		a.into, _ = audio.NewIntonation(asrRate, asrRate*frameMs/1000)
	}
}

// recallSpeaker starts the intonation tracker from what mem remembers of
// device's speaker, and has run leave the session's profile there.
func (a *audioIn) recallSpeaker(mem *SpeakerMemory, device string) {
	if a.into == nil || mem == nil {
		return
	}
	a.speakers = mem
	if p, ok := mem.Recall(device); ok {
		a.into.Recall(p)
		a.log.Debug().Str("device", device).Msg("starting from the speaker's pitch range remembered for the device")
	}
	a.into.RecallRegister(mem.Voices()) // for another speaker at the device, too
}

// endScore is the utterance's end-of-utterance score with the current
// pause's intonation cue; ok is false before any partial was scored.
func (a *audioIn) endScore() (score float64, ok bool) {
	_, score, ok = a.endWait.load(a.uttSeq)
	return endturn.WithCue(score, a.cue), ok
}

// String prints the chain, for logs.
func (a *audioIn) String() string {
	rs := "resample(off)"
	if a.rs != nil {
		rs = fmt.Sprintf("resample(%d→%d)", a.cfg.InputRate, asrRate)
	}
	return fmt.Sprintf("%s -> framer(%d ms) -> vad(end %d ms) -> asr queue(%d)", rs, frameMs, a.cfg.VAD.EndSilenceMs, asrQueueFrames)
}

// run reads in until it closes (errInputClosed), the client sends stop
// (errStopped) or ctx ends.
func (a *audioIn) run(ctx context.Context, in <-chan Input, toASR chan<- asrCmd, toHub chan<- inputEvent) error {
	defer close(toASR)
	defer close(toHub)
	if a.speakers != nil {
		defer func() { a.speakers.Remember(a.cfg.Device, a.into.Profile()) }()
	}
	a.ctx, a.toASR, a.toHub = ctx, toASR, toHub
	a.log.Debug().Stringer("chain", a).Msg("audio in")
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-in:
			if !ok {
				return errInputClosed
			}
			if m.Event != nil {
				if err := a.clientEvent(*m.Event); err != nil {
					return err
				}
				continue
			}
			a.write(m.Audio)
			if a.err != nil {
				return a.err
			}
		}
	}
}

// write pushes one transport message of audio through the chain.
func (a *audioIn) write(pcm []int16) {
	a.arrived = time.Now()
	if a.rs != nil {
		a.rsBuf = a.rs.Process(a.rsBuf, pcm)
		pcm = a.rsBuf
	}
	a.framer.Write(pcm, a.emit)
}

func (a *audioIn) clientEvent(ev ClientEvent) error {
	switch ev.Type {
	case ClientStop:
		a.log.Debug().Msg("client sent stop")
		return errStopped
	case ClientPlaybackStart, ClientInterrupt:
		return a.sendHub(inputEvent{kind: inputClient, event: ev, at: time.Now()})
	default:
		a.log.Debug().Str("type", ev.Type).Msg("ignoring client event")
		return nil
	}
}

// onFrame runs the VAD on one 16 kHz frame and drives the ASR stage.
func (a *audioIn) onFrame(frame []int16) {
	if a.err != nil {
		return
	}
	a.frameCount++
	a.frameTimes[a.frameCount%len(a.frameTimes)] = a.arrived
	if a.clean != nil {
		frame = a.clean.clean(frame, a.arrived)
	}
	switch a.vad.Process(frame) {
	case audio.VADSpeechStart:
		a.uttSeq++
		a.utt = newTraceRec(a.uttSeq)
		// The run that triggered the start began startFrames frames ago.
		a.utt.markAt(MarkSpeechStart, a.frameTime(a.startFrames-1).Add(-frameDur))
		a.speechFrames, a.bargeSent = a.startFrames, false
		a.voicedFrames, a.longSent = a.startFrames, false
		if a.into != nil {
			a.into.Gap()
			a.contour, a.cue = audio.Contour{Range: math.NaN()}, 0
		}
		// One allocation per utterance: the pre-roll travels to the ASR
		// stage, which may still be busy with the previous utterance.
		pre := a.vad.PreRoll(make([]int16, 0, a.preRollSamples))
		a.err = a.sendASR(asrCmd{kind: asrStart, pcm: pre, trace: a.utt})
		a.checkBargeIn()
	case audio.VADSpeechEnd:
		a.endUtterance(a.endFrames)
	default:
		if !a.vad.InSpeech() {
			return
		}
		a.speechFrames++
		a.forward(frame)
		if a.into != nil {
			// 13 µs per speech frame here (BenchmarkAudioInFrame), allocation-free.
			if c, ended := a.into.Listen(frame, a.vad.SilenceFrames()); ended {
				a.contour, a.cue = c, a.turnCfg.IntonationCue(c)
			}
		}
		a.checkBargeIn()
		if a.maxTurnFrames > 0 && a.speechFrames >= a.maxTurnFrames {
			a.turnLimit()
			return
		}
		if a.endWait != nil {
			a.checkEnd()
		}
	}
}

// endUtterance ends the utterance whose last speech frame came back frames
// ago.
func (a *audioIn) endUtterance(back int) {
	ended := a.utt
	if a.utt != nil {
		a.utt.markAt(MarkSpeechEnd, a.frameTime(back))
		score, scored := math.NaN(), false
		if a.endWait != nil {
			_, score, scored = a.endWait.load(a.uttSeq)
			scored = scored && !math.IsNaN(score)
		}
		a.utt.setEndpoint(time.Duration(back)*frameDur, score, scored)
		if a.into != nil && !math.IsNaN(a.contour.Range) {
			a.utt.setIntonation(a.contour.Range, a.cue)
		}
	}
	a.utt, a.pauseSent, a.splitSent = nil, false, false
	a.err = a.sendASR(asrCmd{kind: asrEnd})
	if ended != nil && a.err == nil {
		a.err = a.sendHub(inputEvent{kind: inputCommit, utt: ended.utt, at: a.arrived})
	}
}

// TurnLimitObserver is an optional Observer method: an utterance reached
// Config.MaxTurn and was ended there (web counts it as
// voxpipe_limit_rejections_total{limit="max_turn"}).
type TurnLimitObserver interface {
	TurnLimited()
}

// turnLimit ends an utterance that has lasted Config.MaxTurn, as if its
// speech had ended now: what was said so far is recognised and answered,
// and the turn manager tells the client (CodeTurnLimit). Speech that goes on
// starts a new utterance once the VAD hears it again.
func (a *audioIn) turnLimit() {
	a.log.Info().Dur("max_turn", a.cfg.MaxTurn).Msg("speech reached the turn limit: the utterance ends here")
	if o, ok := a.obs.(TurnLimitObserver); ok {
		o.TurnLimited()
	}
	utt := a.uttSeq
	a.vad.EndSpeech()
	a.endUtterance(0)
	if a.err == nil {
		a.err = a.sendHub(inputEvent{kind: inputTurnLimit, utt: utt, at: a.arrived})
	}
}

// checkEnd ends the utterance when its silence has lasted the wait the
// end-of-utterance stage asked for, and tells the turn manager about pauses
// (speculative answers). One atomic load per silent frame; no allocation.
func (a *audioIn) checkEnd() {
	n := a.vad.SilenceFrames()
	if n == 0 {
		if a.pauseSent {
			a.pauseSent = false
			if a.splitSent {
				// Behind the frame that resumed, which the stage keeps.
				a.splitSent = false
				if a.err = a.sendASR(asrCmd{kind: asrResume}); a.err != nil {
					return
				}
			}
			a.err = a.sendHub(inputEvent{kind: inputResume, utt: a.uttSeq, seq: a.pauseSeq, at: a.arrived})
		}
		return
	}
	room := len(a.toASR) < cap(a.toASR)-asrQueueReserve
	if a.cfg.PauseFinal > 0 && n >= a.pauseFrames && !a.splitSent && room && (a.pauseSent || n == a.pauseFrames) {
		// The partial may end the turn: have the recogniser's final for
		// it. Checked on every silent frame of the pause, as the score of
		// the last words can come after the pause began; a long pause gets
		// it whatever the partial read.
		score, ok := a.endScore()
		if (ok && score >= a.cfg.PauseFinal) || (a.finalFrames > 0 && n >= a.finalFrames) {
			if !a.pauseSent { // the split reports the pause itself
				a.pauseSent = true
				a.pauseSeq++
			}
			a.splitSent = true
			a.toASR <- asrCmd{kind: asrSplit, seq: a.pauseSeq}
		}
	}
	if n == a.pauseFrames && !a.pauseSent && room {
		// The pause travels behind the frames before it, so the turn
		// manager hears of it with the partial of everything said (the
		// recogniser lags the audio under load). A full queue skips it.
		a.pauseSent = true
		a.pauseSeq++
		a.toASR <- asrCmd{kind: asrPause, seq: a.pauseSeq}
	}
	if n < a.minEndFrames {
		return
	}
	waitMs, _, ok := a.endWait.load(a.uttSeq)
	if ok && a.cue != 0 {
		score, _ := a.endScore()
		waitMs = int(a.turnCfg.Wait(score) / time.Millisecond)
	}
	if ok && n*frameMs >= waitMs {
		a.vad.EndSpeech()
		a.endUtterance(n)
	}
}

// frameTime returns when the frame back frames before the current one arrived.
func (a *audioIn) frameTime(back int) time.Time {
	back = min(back, a.frameCount-1, len(a.frameTimes)-1)
	return a.frameTimes[(a.frameCount-back)%len(a.frameTimes)]
}

// forward copies frame into the ring and queues it for the ASR stage, or
// drops it when the queue is full: the audio clock never waits for ASR.
func (a *audioIn) forward(frame []int16) {
	if len(a.toASR) >= cap(a.toASR)-asrQueueReserve {
		a.obs.FrameDropped("asr_queue_full")
		a.log.Debug().Msg("asr queue full, frame dropped")
		return
	}
	slot := a.ring[a.ringNext]
	a.ringNext = (a.ringNext + 1) % len(a.ring)
	copy(slot, frame)
	// Cannot block: this goroutine is the only sender and saw free room.
	a.toASR <- asrCmd{kind: asrFrame, pcm: slot[:len(frame)]}
}

func (a *audioIn) checkBargeIn() {
	if a.longFrames > 0 && !a.longSent && a.vad.SilenceFrames() == 0 {
		if a.voicedFrames++; a.voicedFrames >= a.longFrames {
			a.longSent = true
			if err := a.sendHub(inputEvent{kind: inputLongSpeech, utt: a.uttSeq, at: time.Now()}); err != nil {
				a.err = err
				return
			}
		}
	}
	if !a.cfg.BargeIn || a.bargeSent || a.speechFrames < a.bargeInFrames {
		return
	}
	a.bargeSent = true
	if err := a.sendHub(inputEvent{kind: inputSpeech, utt: a.uttSeq, at: time.Now()}); err != nil {
		a.err = err
	}
}

// sendASR sends a start or end command; these are never dropped and wait
// only when the ASR stage has a full queue (the reserve makes that rare).
func (a *audioIn) sendASR(c asrCmd) error {
	select {
	case a.toASR <- c:
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// sendHub waits for the turn manager, which never blocks for long.
func (a *audioIn) sendHub(ev inputEvent) error {
	select {
	case a.toHub <- ev:
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}
