package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// asrQueueFrames bounds the audio waiting for the ASR stage: 3 s. When it is
// full, frames are dropped (counted as asr_queue_full) rather than stall the
// audio clock. pocketsphinx has taken up to 237 ms on a single 20 ms chunk
// (voice-engines.md §5) and falls behind real time while other sessions
// share the cores, so 1 s dropped speech under load; 3 s costs 96 KB.
const asrQueueFrames = 150

// asrQueueReserve slots are kept free for asrStart/asrEnd, which are never
// dropped.
const asrQueueReserve = 2

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

	// ring holds the frames in flight to the ASR stage. It has
	// asrQueueFrames+2 slots: the queue holds at most asrQueueFrames and the
	// ASR stage works on one, so the slot written next is never in use.
	ring     [][]int16
	ringNext int

	startFrames    int // speech frames already behind a SpeechStart
	endFrames      int // non-speech frames already behind a SpeechEnd
	bargeInFrames  int // speech frames before a barge-in report
	preRollSamples int

	// The audio clock: when each of the last frames arrived (the end of its
	// audio, as near as the transport tells), so that speech_start and
	// speech_end say when the person started and stopped speaking, not when
	// the VAD became sure of it (StartMs and EndSilenceMs later).
	arrived    time.Time   // the Input message being processed
	frameTimes []time.Time // ring, indexed by frameCount
	frameCount int

	// Per utterance.
	uttSeq       int
	utt          *traceRec
	speechFrames int
	bargeSent    bool

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
	a.preRollSamples = asrRate*(cfg.VAD.PreRollMs+cfg.VAD.StartMs)/1000 + frameSamples
	a.emit = a.onFrame
	return a, nil
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
	switch a.vad.Process(frame) {
	case audio.VADSpeechStart:
		a.uttSeq++
		a.utt = newTraceRec(a.uttSeq)
		// The run that triggered the start began startFrames frames ago.
		a.utt.markAt(MarkSpeechStart, a.frameTime(a.startFrames-1).Add(-frameDur))
		a.speechFrames, a.bargeSent = a.startFrames, false
		// One allocation per utterance: the pre-roll travels to the ASR
		// stage, which may still be busy with the previous utterance.
		pre := a.vad.PreRoll(make([]int16, 0, a.preRollSamples))
		a.err = a.sendASR(asrCmd{kind: asrStart, pcm: pre, trace: a.utt})
		a.checkBargeIn()
	case audio.VADSpeechEnd:
		if a.utt != nil {
			// The last speech frame came endFrames frames ago.
			a.utt.markAt(MarkSpeechEnd, a.frameTime(a.endFrames))
		}
		a.utt = nil
		a.err = a.sendASR(asrCmd{kind: asrEnd})
	default:
		if !a.vad.InSpeech() {
			return
		}
		a.speechFrames++
		a.forward(frame)
		a.checkBargeIn()
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
