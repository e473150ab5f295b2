//go:build cgo

package flite

/*
#cgo LDFLAGS: -lflite_cmu_us_slt -lflite_cmu_us_rms -lflite_cmu_us_awb -lflite_cmu_us_kal16 -lflite_usenglish -lflite_cmulex -lflite -lm
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

// chunkSamples is the streaming granularity asked of flite: 50 ms of audio
// costs flite ~1 ms, so this adds little to time-to-first-audio while
// keeping the number of chunks (allocations, channel sends) low.
const chunkSamples = 800

var (
	// engine serialises every call into flite (see the package comment)
	// and guards the variables below and the C token scratch buffer in
	// bridge.c. It is a one-slot semaphore so that a caller whose context
	// ends (a barge-in) stops waiting for its turn.
	engine = make(chan struct{}, 1)
	inited bool
	voices = map[string]*C.vp_flite_voice{} // registered once, never freed
)

// Voice is a handle on one registered CMU voice. The voice data itself is
// process-wide and lives as long as the process (flite has no safe way to
// unregister a voice another Voice may be using); Close only retires this
// handle.
type Voice struct {
	name   string
	cv     *C.vp_flite_voice
	closed atomic.Bool
}

// OpenVoice returns the named voice (one of Voices), registering it on first
// use. An unknown name gives an error wrapping ErrVoice.
func OpenVoice(name string) (*Voice, error) {
	if !knownVoice(name) {
		return nil, fmt.Errorf("flite: voice %q (have slt, rms, awb, kal16): %w", name, ErrVoice)
	}
	engine <- struct{}{}
	defer func() { <-engine }()
	if !inited {
		C.flite_init()
		inited = true
	}
	cv, ok := voices[name]
	if !ok {
		mem := C.calloc(1, C.size_t(unsafe.Sizeof(C.vp_flite_voice{})))
		if mem == nil {
			return nil, fmt.Errorf("flite: register voice %s: out of memory", name)
		}
		cv = (*C.vp_flite_voice)(mem)
		cname := C.CString(name)
		rc := C.vp_flite_register(cname, cv, chunkSamples)
		C.free(unsafe.Pointer(cname))
		if rc != 0 {
			C.free(mem)
			return nil, fmt.Errorf("flite: register voice %s failed: %w", name, ErrSynth)
		}
		voices[name] = cv
	}
	return &Voice{name: name, cv: cv}, nil
}

// Name returns the voice's name.
func (v *Voice) Name() string { return v.name }

// Close retires the handle. It is idempotent.
func (v *Voice) Close() error {
	v.closed.Store(true)
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
	total    int // samples received so far, across utterances
	timer    wordTimer
	toks     []token
}

// Synthesize speaks text, calling emit with each chunk as flite produces it.
// It returns when the text is spoken, when ctx is done (ctx.Err()), or with
// emit's error. Calls from all goroutines are serialised; emit runs inside
// the engine lock.
func (v *Voice) Synthesize(ctx context.Context, text string, opts Options, emit EmitFunc) error {
	if v.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !speakable(text) {
		return nil
	}
	c := &call{ctx: ctx, emit: emit, timer: wordTimer{text: text}}
	h := cgo.NewHandle(c)
	defer h.Delete()
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))

	select {
	case engine <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-engine }() // before a re-raised callback panic goes on
	stretch := float64(v.cv.default_stretch)
	if opts.Rate > 0 {
		stretch /= opts.Rate
	}
	f0 := float64(v.cv.default_f0)
	if opts.Pitch > 0 {
		f0 = opts.Pitch
	}
	if C.vp_flite_synth(v.cv, C.uintptr_t(h), ctext, C.float(stretch), C.float(f0)) != 0 {
		return fmt.Errorf("flite: voice %s: %w", v.name, ErrSynth)
	}
	if c.panicked != nil {
		panic(c.panicked)
	}
	if c.err != nil {
		return c.err
	}
	return ctx.Err()
}

// speakable reports whether text has anything but whitespace and NULs
// (flite synthesises an empty utterance otherwise).
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

//export goFliteChunk
func goFliteChunk(handle C.uintptr_t, samples *C.short, n, last, newUtt C.int, toks *C.vp_flite_token, ntok C.int) (ret C.int) {
	c := cgo.Handle(handle).Value().(*call)
	// A panic must not unwind through flite's C frames (flite would be
	// left mid-utterance): it stops the synthesis cleanly and Synthesize
	// re-raises it once flite has returned and the engine lock is free.
	defer func() {
		if p := recover(); p != nil {
			c.panicked = &CallbackPanic{Value: p, Stack: debug.Stack()}
			ret = C.CST_AUDIO_STREAM_STOP
		}
	}()
	if c.err != nil {
		return C.CST_AUDIO_STREAM_STOP
	}
	if err := c.ctx.Err(); err != nil {
		c.err = err
		return C.CST_AUDIO_STREAM_STOP
	}
	if newUtt != 0 {
		c.toks = c.toks[:0]
		if ntok > 0 {
			for _, t := range unsafe.Slice(toks, int(ntok)) {
				c.toks = append(c.toks, token{
					name:    C.GoStringN(t.name, t.name_len),
					filePos: int(t.file_pos),
					preLen:  int(t.pre_len),
					end:     float64(t.end),
				})
			}
		}
		c.timer.startUtterance(c.total, c.toks)
	}
	c.total += int(n)
	words := c.timer.take(nil, c.total, last != 0)
	var pcm []int16
	if n > 0 {
		pcm = make([]int16, int(n))
		copy(pcm, unsafe.Slice((*int16)(unsafe.Pointer(samples)), int(n)))
	}
	if n <= 0 && len(words) == 0 {
		return C.CST_AUDIO_STREAM_CONT
	}
	if err := c.emit(pcm, words); err != nil {
		c.err = err
		return C.CST_AUDIO_STREAM_STOP
	}
	return C.CST_AUDIO_STREAM_CONT
}
