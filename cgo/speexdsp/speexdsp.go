//go:build cgo

package speexdsp

/*
#cgo pkg-config: speexdsp
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
#include <stdlib.h>

// The ctl calls take a void pointer to an int; these keep the int on the C
// side so no Go pointer is handed to a variadic-looking API.
static int vp_pre_set(SpeexPreprocessState *st, int req, int v) { return speex_preprocess_ctl(st, req, &v); }
static int vp_echo_set(SpeexEchoState *st, int req, int v) { return speex_echo_ctl(st, req, &v); }
static int vp_echo_ir_size(SpeexEchoState *st) {
	int n = 0;
	speex_echo_ctl(st, SPEEX_ECHO_GET_IMPULSE_RESPONSE_SIZE, &n);
	return n;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Processor cleans microphone frames: echo cancellation against a
// reference, then noise and residual-echo suppression. Its C state is freed
// by Close, never by the garbage collector.
//
// The preprocessor (Denoise, ResidualEcho) works on overlapping windows and
// delays the audio by one frame; the echo canceller alone adds no delay.
// Short frames (10 ms) keep that small.
type Processor struct {
	cfg  Config
	echo *C.SpeexEchoState       // nil without echo cancellation
	pre  *C.SpeexPreprocessState // nil when neither denoise nor echo is on
	// ir receives the filter's impulse response (Delay); allocated by C,
	// freed by Close.
	ir  *C.spx_int32_t
	irN int
}

// NewProcessor allocates the echo canceller and preprocessor cfg asks for.
func NewProcessor(cfg Config) (*Processor, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p := &Processor{cfg: cfg}
	n := C.int(cfg.FrameSamples)
	if cfg.EchoTailSamples > 0 {
		p.echo = C.speex_echo_state_init(n, C.int(cfg.EchoTailSamples))
		if p.echo == nil {
			return nil, fmt.Errorf("speexdsp: echo canceller of %d samples: out of memory", cfg.EchoTailSamples)
		}
		C.vp_echo_set(p.echo, C.SPEEX_ECHO_SET_SAMPLING_RATE, C.int(cfg.SampleRate))
		p.irN = int(C.vp_echo_ir_size(p.echo))
	}
	if !cfg.Denoise && !cfg.ResidualEcho {
		return p, nil
	}
	p.pre = C.speex_preprocess_state_init(n, C.int(cfg.SampleRate))
	if p.pre == nil {
		p.Close()
		return nil, fmt.Errorf("speexdsp: preprocessor: out of memory")
	}
	// speexdsp applies its echo suppression through the denoiser's gains:
	// without Denoise it runs with a noise attenuation of 0 dB.
	C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_DENOISE, 1)
	C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_AGC, 0)
	C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_DEREVERB, 0)
	switch {
	case !cfg.Denoise:
		C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, 0)
	case cfg.NoiseSuppressDB != 0:
		C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, C.int(cfg.NoiseSuppressDB))
	}
	if cfg.ResidualEcho {
		// The preprocessor keeps this C pointer; both are freed together.
		C.speex_preprocess_ctl(p.pre, C.SPEEX_PREPROCESS_SET_ECHO_STATE, unsafe.Pointer(p.echo))
		if cfg.EchoSuppressDB != 0 {
			C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, C.int(cfg.EchoSuppressDB))
		}
		if cfg.EchoSuppressActiveDB != 0 {
			C.vp_pre_set(p.pre, C.SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, C.int(cfg.EchoSuppressActiveDB))
		}
	}
	return p, nil
}

// Config returns the settings p was made with.
func (p *Processor) Config() Config { return p.cfg }

// Process cleans one microphone frame into out (which may be mic itself).
// ref is what the speaker played during the frame (the far end), the same
// length; with echo cancellation off it may be nil. Each slice must hold
// exactly Config.FrameSamples samples. No allocation; C keeps no pointer
// to them after the call.
func (p *Processor) Process(mic, ref, out []int16) error {
	if p.echo == nil && p.pre == nil {
		return ErrClosed
	}
	n := p.cfg.FrameSamples
	if len(mic) != n || len(out) != n || (p.echo != nil && len(ref) != n) {
		return fmt.Errorf("%w: mic %d, ref %d, out %d samples (want %d)", ErrFrame, len(mic), len(ref), len(out), n)
	}
	o := (*C.spx_int16_t)(unsafe.Pointer(&out[0]))
	if p.echo != nil {
		if &mic[0] == &out[0] {
			// speex_echo_cancellation reads its input while it writes the
			// output; it must not work in place.
			return fmt.Errorf("%w: echo cancellation cannot work in place (mic and out are one buffer)", ErrFrame)
		}
		C.speex_echo_cancellation(p.echo, (*C.spx_int16_t)(unsafe.Pointer(&mic[0])),
			(*C.spx_int16_t)(unsafe.Pointer(&ref[0])), o)
	} else if &mic[0] != &out[0] {
		copy(out, mic)
	}
	if p.pre != nil {
		C.speex_preprocess_run(p.pre, o)
	}
	return nil
}

// Delay is where the echo canceller's filter puts the strongest echo path,
// in samples from the reference to the microphone: the delay it has
// estimated and tracks as it adapts. ok is false without echo cancellation
// or before the filter holds anything.
func (p *Processor) Delay() (samples int, ok bool) {
	if p.echo == nil || p.irN == 0 {
		return 0, false
	}
	if p.ir == nil {
		p.ir = (*C.spx_int32_t)(C.malloc(C.size_t(p.irN) * C.size_t(unsafe.Sizeof(C.spx_int32_t(0)))))
		if p.ir == nil {
			return 0, false
		}
	}
	C.speex_echo_ctl(p.echo, C.SPEEX_ECHO_GET_IMPULSE_RESPONSE, unsafe.Pointer(p.ir))
	ir := unsafe.Slice((*int32)(unsafe.Pointer(p.ir)), p.irN)
	best, at := int64(0), -1
	for i, v := range ir {
		m := int64(v)
		if m < 0 {
			m = -m
		}
		if m > best {
			best, at = m, i
		}
	}
	if at < 0 {
		return 0, false
	}
	return at, true
}

// Reset forgets what the echo canceller has learnt (a new device, a new
// room); the preprocessor keeps its noise estimate.
func (p *Processor) Reset() {
	if p.echo != nil {
		C.speex_echo_state_reset(p.echo)
	}
}

// Close frees the C state. It is idempotent; Process after it returns
// ErrClosed.
func (p *Processor) Close() error {
	if p.pre != nil {
		C.speex_preprocess_state_destroy(p.pre)
		p.pre = nil
	}
	if p.echo != nil {
		C.speex_echo_state_destroy(p.echo)
		p.echo = nil
	}
	if p.ir != nil {
		C.free(unsafe.Pointer(p.ir))
		p.ir = nil
	}
	return nil
}
