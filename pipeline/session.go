package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/voxpipe/voxpipe/llm"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/chunk"
)

// Input is one message from the transport: exactly one field is set. Audio is
// mono PCM16 at Config.InputRate, any length; ownership passes to the session.
type Input struct {
	Audio []int16
	Event *ClientEvent
}

// Output is one message to the transport: Audio is one 20 ms frame at
// Config.OutputRate (ownership passes), or Event.
type Output struct {
	Audio []int16
	Event *Event
}

// Session is one conversation: it turns the client's audio into spoken
// answers. Create it with NewSession and serve it with Run.
type Session struct {
	id  string
	cfg Config
	be  Backends
	obs Observer
	log zerolog.Logger

	ran atomic.Bool
	// turn is the number of the latest turn started (0 before the first);
	// every log line of the session carries it (turnHook).
	turn atomic.Int64
	ain  *audioIn      // built by NewSession so a bad rate or VAD setting fails early
	fwd  *ttsForwarder // likewise for the TTS → output resampler

	prefiller llm.Prefiller // be.LLM when early start is on, else nil
	endWait   endWait       // the semantic end of turn's latest decision (eou.go)

	// conv is the conversation the session's tools act in (timers ring
	// into it); ownConv: the session made it and ends it with Run.
	conv    *tools.Conversation
	ownConv bool

	histMu  sync.Mutex    // guards history
	history []llm.Message // system prompt first; written by the turn manager only

	// turnBase is the turn number before the session's first (Resume).
	turnBase int
	// numbered is the last turn number handed out (a final transcript's,
	// perhaps of a turn that never started), stored when Run ends.
	numbered atomic.Int64
}

// NewSession checks cfg and prepares a session; nothing runs until Run.
func NewSession(id string, cfg Config, be Backends, obs Observer, log zerolog.Logger) (*Session, error) {
	cfg, err := cfg.validate(be)
	if err != nil {
		return nil, err
	}
	if obs == nil {
		obs = nopObserver{}
	}
	s := &Session{
		id:  id,
		cfg: cfg,
		be:  be,
		obs: obs,
	}
	s.log = log.With().Str("session", id).Logger().Hook(turnHook{&s.turn})
	stageLog := func(name string) zerolog.Logger { return s.log.With().Str("stage", name).Logger() }
	if s.ain, err = newAudioIn(cfg, obs, stageLog("audio_in")); err != nil {
		return nil, err
	}
	if cfg.Turn.Mode == endturn.ModeSemantic {
		s.ain.semantic(&s.endWait, cfg.Turn)
		s.ain.recallSpeaker(be.Speakers, cfg.Device)
	}
	if s.fwd, err = newTTSForwarder(be.TTS.SampleRate(), cfg.OutputRate, stageLog("tts")); err != nil {
		return nil, err
	}
	if s.prefiller, err = cfg.EarlyStart.Prefiller(be.LLM); err != nil {
		return nil, err
	}
	if be.Conversations != nil && cfg.ConversationKey != "" {
		s.conv = be.Conversations.Open(cfg.ConversationKey)
	} else {
		s.conv, s.ownConv = tools.NewConversation(id, nil, s.log), true
	}
	if cfg.SystemPrompt != "" {
		s.history = append(s.history, llm.Message{Role: llm.RoleSystem, Content: cfg.SystemPrompt})
	}
	return s, nil
}

// History returns a copy of the conversation so far (system prompt first).
func (s *Session) History() []llm.Message {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	return append([]llm.Message(nil), s.history...)
}

// Resume makes s continue a conversation an earlier session held: history
// (as that session's History returned it, system prompt first) replaces
// s's, and turns are numbered on from lastTurn. Call it before Run.
func (s *Session) Resume(history []llm.Message, lastTurn int) error {
	if s.ran.Load() {
		return ErrAlreadyRun
	}
	if lastTurn < 0 {
		return fmt.Errorf("%w: negative resumed turn %d", ErrConfig, lastTurn)
	}
	h := capHistory(slices.Clone(history), s.cfg.MaxHistoryMessages)
	s.histMu.Lock()
	s.history = h
	s.histMu.Unlock()
	s.turnBase = lastTurn
	s.turn.Store(int64(lastTurn))
	return nil
}

// LastTurn is the number of the latest turn started (0 before the first);
// after Run it is the last number handed out, started or not: the one to
// pass to a resuming session's Resume.
func (s *Session) LastTurn() int { return int(max(s.turn.Load(), s.numbered.Load())) }

// Run serves until in is closed, ctx ends or the client sends stop. The
// transport creates and closes in and out; Run never closes them. out should
// be read promptly (it is unbuffered; the session paces audio itself and
// marks first_audio_out when a frame is handed over).
//
// Run returns nil when in is closed or the client sends stop, ctx.Err() when
// ctx ends, and ErrAlreadyRun on a second call. Backend failures do not end
// the session: they reach the client as error events.
func (s *Session) Run(ctx context.Context, in <-chan Input, out chan<- Output) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	stageLog := func(name string) zerolog.Logger { return s.log.With().Str("stage", name).Logger() }
	ain, fwd := s.ain, s.fwd
	asrSt := &asrStage{rec: s.be.ASR, log: stageLog("asr"), obs: s.obs, inputRate: s.cfg.InputRate, keep: s.cfg.PauseFinal > 0}
	llmSt := &llmStage{model: s.be.LLM, chunker: chunk.New(s.cfg.Chunk), log: stageLog("llm"), stall: s.cfg.LLMStallTimeout, apology: s.cfg.Apology, gate: s.be.TTSGate, tools: s.cfg.Tools}
	ttsSt := &ttsStage{synth: s.be.TTS, log: stageLog("tts"), gate: s.be.TTSGate, outRate: s.cfg.OutputRate}
	pc := newPacer(s.cfg, s.obs, stageLog("out"))
	if cl := s.room(ain, pc, stageLog("audio_in")); cl != nil {
		defer cl.Close()
	}
	h := &hub{s: s, cfg: s.cfg, log: stageLog("turn"), turnSeq: s.turnBase}
	h.bc, _ = newBackchannels(s.cfg.Backchannel) // checked by NewSession
	h.early.stable = time.Duration(s.cfg.EarlyStartStableMs) * time.Millisecond
	notices, finishNotices := s.attachNotices()
	h.notices = notices
	var eouSt *eouStage // semantic end of turn
	if s.cfg.Turn.Mode == endturn.ModeSemantic {
		h.eou = make(chan eouJob, 1)
		eouSt = &eouStage{scorer: s.be.EOU, cfg: s.cfg.Turn, key: s.id, wait: &s.endWait, log: stageLog("eou")}
	}
	var prefills chan *prefillJob // the hub's early-start jobs; nil when early start is off
	var pf *prefillStage
	if s.prefiller != nil {
		prefills = make(chan *prefillJob) // unbuffered: a job waiting in the hub stays replaceable
		h.prefills = prefills
		pf = &prefillStage{model: s.prefiller, log: stageLog("prefill")}
	}

	// Every channel is made here and handed, sending end first, to the one
	// stage that sends on it and closes it.
	var (
		asrCmds   = make(chan asrCmd, asrQueueFrames)
		inputEvs  = make(chan inputEvent, 16)
		asrEvs    = make(chan asrEvent, 16)
		llmJobs   = make(chan *turn, 1)
		llmEvs    = make(chan llmEvent, 64)
		ttsJobs   = make(chan ttsJob, 32)
		ttsCalls  = make(chan ttsCall)   // unbuffered: see ttsStage
		ttsPCM    = make(chan tts.Chunk) // unbuffered: see ttsStage
		ttsFails  = make(chan ttsFailure, 4)
		paced     = make(chan pacedAudio, 16)
		outCtls   = make(chan outCtl, 16)
		outReport = make(chan pacerReport, 4)
	)
	s.log.Debug().Int("input_rate", s.cfg.InputRate).Int("output_rate", s.cfg.OutputRate).
		Int("tts_rate", s.be.TTS.SampleRate()).Msg("session started")
	g, gctx := errgroup.WithContext(ctx)
	g.Go(guard("audio_in", s.log, func() error { return ain.run(gctx, in, asrCmds, inputEvs) }))
	g.Go(guard("asr", s.log, func() error { return asrSt.run(gctx, asrCmds, asrEvs) }))
	g.Go(guard("turn", s.log, func() error {
		return h.run(gctx, inputEvs, asrEvs, llmEvs, ttsFails, outReport, llmJobs, outCtls)
	}))
	g.Go(guard("llm", s.log, func() error { return llmSt.run(gctx, llmJobs, ttsJobs, llmEvs) }))
	g.Go(guard("tts", s.log, func() error { return ttsSt.run(gctx, ttsJobs, ttsCalls, ttsPCM, ttsFails) }))
	g.Go(guard("tts_forward", s.log, func() error { return fwd.run(gctx, ttsCalls, ttsPCM, paced) }))
	g.Go(guard("out", s.log, func() error { return pc.run(gctx, paced, outCtls, out, outReport) }))
	if prefills != nil {
		g.Go(guard("prefill", s.log, func() error { return pf.run(gctx, prefills) }))
	}
	if eouSt != nil {
		g.Go(func() error { return eouSt.run(gctx, h.eou) })
	}
	err := g.Wait()
	s.numbered.Store(int64(h.turnSeq)) // the hub's goroutine has returned
	finishNotices(h.queued)
	switch {
	case errors.Is(err, errInputClosed), errors.Is(err, errStopped):
		s.log.Debug().Err(err).Msg("session ended")
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		s.log.Error().Err(err).Msg("session failed")
	}
	return err
}

// turnHook adds the session's current turn number to every log line, so
// each line of a session can be followed by session and turn.
type turnHook struct{ turn *atomic.Int64 }

func (h turnHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Int64("turn", h.turn.Load())
}
