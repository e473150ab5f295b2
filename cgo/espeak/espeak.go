//go:build cgo

package espeak

/*
#cgo pkg-config: espeak-ng
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

var (
	// engine serialises every call into espeak-ng (see the package
	// comment) and guards the variables below and the current handle in
	// bridge.c. It is a one-slot semaphore so that a caller whose context
	// ends (a barge-in) stops waiting for its turn.
	engine   = make(chan struct{}, 1)
	initDone bool
	initErr  error
	curVoice string // voice espeak has loaded now; "" after a failed switch
)

// Speaker speaks with one espeak-ng voice. Speakers share the one engine;
// Close only retires the handle.
type Speaker struct {
	voice  string
	closed atomic.Bool
}

// New checks that espeak-ng starts and knows voice ("en-us", "cmn", "de",
// variants such as "en-us+f3"). An unknown voice gives an error wrapping
// ErrVoice.
func New(voice string) (*Speaker, error) {
	if voice == "" {
		return nil, fmt.Errorf("espeak: empty voice name: %w", ErrVoice)
	}
	engine <- struct{}{}
	defer func() { <-engine }()
	if err := initLocked(); err != nil {
		return nil, err
	}
	if err := setVoiceLocked(voice); err != nil {
		return nil, err
	}
	return &Speaker{voice: voice}, nil
}

func initLocked() error {
	if initDone {
		return initErr
	}
	initDone = true
	rate := int(C.vp_espeak_init())
	switch {
	case rate <= 0:
		initErr = ErrInit
	case rate != SampleRate:
		initErr = fmt.Errorf("espeak: engine runs at %d Hz, want %d: %w", rate, SampleRate, ErrInit)
	}
	return initErr
}

func setVoiceLocked(voice string) error {
	if voice == curVoice {
		return nil
	}
	cname := C.CString(voice)
	defer C.free(unsafe.Pointer(cname))
	rc := C.espeak_SetVoiceByName(cname)
	curVoice = ""
	switch rc {
	case C.EE_OK:
		curVoice = voice
		return nil
	case C.EE_NOT_FOUND:
		return fmt.Errorf("espeak: voice %q not found (list them with espeak-ng --voices): %w", voice, ErrVoice)
	default:
		return fmt.Errorf("espeak: set voice %q: status %d: %w", voice, int(rc), ErrSynth)
	}
}

func setParamLocked(param C.espeak_PARAMETER, value int) error {
	if rc := C.espeak_SetParameter(param, C.int(value), 0); rc != C.EE_OK {
		return fmt.Errorf("espeak: set parameter %d to %d: status %d: %w", int(param), value, int(rc), ErrSynth)
	}
	return nil
}

// Voice returns the speaker's voice name.
func (s *Speaker) Voice() string { return s.voice }

// Close retires the speaker. It is idempotent.
func (s *Speaker) Close() error {
	s.closed.Store(true)
	return nil
}

// call is the state of one synthesis, reached from the C callback through a
// cgo.Handle.
type call struct {
	ctx  context.Context
	emit EmitFunc
	err  error
	// panicked is a panic recovered in the callback, re-raised by
	// Synthesize after the C call returned.
	panicked *CallbackPanic
	total    int // samples received so far
	words    wordTracker
}

// Synthesize speaks text, calling emit with each chunk as espeak produces
// it. It returns when the text is spoken, when ctx is done (ctx.Err()), or
// with emit's error. Calls from all goroutines are serialised; emit runs
// inside the engine lock.
func (s *Speaker) Synthesize(ctx context.Context, text string, opts Options, emit EmitFunc) error {
	if s.closed.Load() {
		return ErrClosed
	}
	rate := opts.Rate
	if rate == 0 {
		rate = DefaultRate
	}
	if rate < MinRate || rate > MaxRate || opts.Pitch < 0 || opts.Pitch > 100 {
		return fmt.Errorf("espeak: rate %d (want %d..%d), pitch %d (want 0..100): %w",
			opts.Rate, MinRate, MaxRate, opts.Pitch, ErrOptions)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !speakable(text) {
		return nil // espeak would still emit a short silence
	}
	c := &call{ctx: ctx, emit: emit, words: newWordTracker(text)}
	h := cgo.NewHandle(c)
	defer h.Delete()
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))

	select {
	case engine <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-engine }()
	if err := initLocked(); err != nil {
		return err
	}
	// Loading a voice reads its dictionary, so it is skipped when espeak
	// has it already; rate and pitch are cheap and always set.
	if err := setVoiceLocked(s.voice); err != nil {
		return err
	}
	if err := setParamLocked(C.espeakRATE, rate); err != nil {
		return err
	}
	if err := setParamLocked(C.espeakPITCH, opts.Pitch); err != nil {
		return err
	}
	rc := C.vp_espeak_synth(C.uintptr_t(h), ctext)
	if c.panicked != nil {
		panic(c.panicked)
	}
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if rc != C.EE_OK {
		return fmt.Errorf("espeak: voice %s: status %d: %w", s.voice, int(rc), ErrSynth)
	}
	if m, ok := c.words.close(c.total); ok {
		return emit(nil, []WordMark{m})
	}
	return nil
}

//export goEspeakChunk
func goEspeakChunk(handle C.uintptr_t, wav *C.short, n C.int, events *C.espeak_EVENT, nev, done C.int) (ret C.int) {
	const abort, cont = 1, 0
	if handle == 0 {
		return abort
	}
	c := cgo.Handle(handle).Value().(*call)
	// A panic must not unwind through espeak's C frames: espeak would keep
	// the unfinished text's state and mix it into the next synthesis. It
	// aborts the synthesis cleanly and Synthesize re-raises it once espeak
	// has returned and the engine lock is free.
	defer func() {
		if p := recover(); p != nil {
			c.panicked = &CallbackPanic{Value: p, Stack: debug.Stack()}
			ret = abort
		}
	}()
	if c.err != nil {
		return abort
	}
	if err := c.ctx.Err(); err != nil {
		c.err = err
		return abort
	}
	c.total += int(n)
	var words []WordMark
	if nev > 0 {
		for _, ev := range unsafe.Slice(events, int(nev)) {
			// audio_position is in ms from the start of this text.
			sample := min(int(ev.audio_position)*SampleRate/1000, c.total)
			var m WordMark
			ok := false
			switch ev._type {
			case C.espeakEVENT_WORD:
				m, ok = c.words.word(int(ev.text_position), int(ev.length), sample)
			case C.espeakEVENT_END, C.espeakEVENT_MSG_TERMINATED:
				m, ok = c.words.close(sample)
			}
			if ok {
				words = append(words, m)
			}
		}
	}
	if done != 0 {
		if m, ok := c.words.close(c.total); ok {
			words = append(words, m)
		}
	}
	var pcm []int16
	if n > 0 {
		pcm = make([]int16, int(n))
		copy(pcm, unsafe.Slice((*int16)(unsafe.Pointer(wav)), int(n)))
	}
	if n <= 0 && len(words) == 0 {
		return cont
	}
	if err := c.emit(pcm, words); err != nil {
		c.err = err
		return abort
	}
	return cont
}

// speakable reports whether text has anything but whitespace and NULs.
func speakable(text string) bool {
	for _, r := range text {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f', 0:
		default:
			return true
		}
	}
	return false
}
