// Package silero runs Silero VAD v6 (16 kHz) in pure Go: a neural
// voice-activity detector that gives, for each 32 ms window, the probability
// that it holds speech. The network is small (about 0.3 M weights, 0.7 M
// multiply-adds a window):
//
//	window (512 samples) with the previous window's last 64 in front
//	→ reflection pad 64 on the right → STFT as a fixed convolution
//	  (256-sample frames, hop 128, 129 bins) → magnitudes
//	→ 4 convolutions with ReLU (129→128, 128→64 stride 2, 64→64 stride 2, 64→128)
//	→ LSTM cell (128) → ReLU → 1×1 convolution → sigmoid.
//
// The weights come from the published ONNX graph (package models), read at
// start by a minimal protobuf reader; the graph's nodes are implemented
// here and checked against ONNX Runtime on real audio (silero_test.go).
//
// Concurrency: a Model is read-only and may be shared; a Detector carries one
// stream's state and scratch and has one owner.
package silero

import (
	"fmt"
	"math"
	"sync"

	"github.com/voxpipe/voxpipe/models"
)

// The shape of the 16 kHz network.
const (
	SampleRate  = 16000
	WindowSize  = 512 // samples per Window call (32 ms)
	contextSize = 64  // samples of the previous window put in front
	fftSize     = 256
	hop         = 128
	bins        = fftSize/2 + 1 // 129
	inputSize   = contextSize + WindowSize
	paddedSize  = inputSize + contextSize // reflection pad on the right
	frames      = (paddedSize-fftSize)/hop + 1
	hidden      = 128
)

// conv1d is a 1-D convolution with kernel 3 and padding 1.
type conv1d struct {
	in, out, stride int
	w               []float32 // [out][in][3]
	b               []float32 // [out]
}

// outLen is the output length for an input of n steps.
func (c *conv1d) outLen(n int) int { return (n+2-3)/c.stride + 1 }

// apply computes dst[o*m+t] = relu(b[o] + Σ w[o][i][k]·src[i*n + t*stride+k-1])
// for n input steps and returns m. col is scratch of at least in*3 values:
// each output step gathers its input patch there (zero where the padding
// is), so the sum is one contiguous dot product per output.
func (c *conv1d) apply(dst, src, col []float32, n int) int {
	m := c.outLen(n)
	k := c.in * 3
	col = col[:k]
	for t := range m {
		base := t*c.stride - 1
		for i := range c.in {
			row := src[i*n : (i+1)*n]
			for j := range 3 {
				v := float32(0)
				if p := base + j; p >= 0 && p < n {
					v = row[p]
				}
				col[i*3+j] = v
			}
		}
		for o := range c.out {
			dst[o*m+t] = max(c.b[o]+dot(c.w[o*k:(o+1)*k], col), 0)
		}
	}
	return m
}

// Model is the network's weights.
type Model struct {
	basis   []float32 // [2*bins][fftSize]: real rows then imaginary rows
	enc     [4]conv1d
	wih     []float32 // [4*hidden][hidden], gates i, f, g, o
	whh     []float32 // [4*hidden][hidden]
	bias    []float32 // bih + bhh, [4*hidden]
	outW    []float32 // [hidden]
	outBias float32
}

// Parse reads the weights from a Silero VAD v5/v6 16 kHz ONNX graph.
func Parse(onnx []byte) (*Model, error) {
	w, err := readInitializers(onnx)
	if err != nil {
		return nil, err
	}
	get := func(name string, dims ...int) ([]float32, error) {
		t, ok := w[name]
		if !ok {
			return nil, fmt.Errorf("%w: no weight %q", ErrModel, name)
		}
		if fmt.Sprint(t.dims) != fmt.Sprint(dims) {
			return nil, fmt.Errorf("%w: %q has shape %v, want %v", ErrModel, name, t.dims, dims)
		}
		return t.data, nil
	}
	m := &Model{}
	if m.basis, err = get("model.stft.forward_basis_buffer", 2*bins, 1, fftSize); err != nil {
		return nil, err
	}
	shapes := [4][3]int{{bins, 128, 1}, {128, 64, 2}, {64, 64, 2}, {64, 128, 1}}
	for i, s := range shapes {
		c := &m.enc[i]
		c.in, c.out, c.stride = s[0], s[1], s[2]
		prefix := fmt.Sprintf("model.encoder.%d.reparam_conv.", i)
		if c.w, err = get(prefix+"weight", c.out, c.in, 3); err != nil {
			return nil, err
		}
		if c.b, err = get(prefix+"bias", c.out); err != nil {
			return nil, err
		}
	}
	if m.wih, err = get("model.decoder.rnn.weight_ih", 4*hidden, hidden); err != nil {
		return nil, err
	}
	if m.whh, err = get("model.decoder.rnn.weight_hh", 4*hidden, hidden); err != nil {
		return nil, err
	}
	bih, err := get("model.decoder.rnn.bias_ih", 4*hidden)
	if err != nil {
		return nil, err
	}
	bhh, err := get("model.decoder.rnn.bias_hh", 4*hidden)
	if err != nil {
		return nil, err
	}
	m.bias = make([]float32, 4*hidden)
	for i := range m.bias {
		m.bias[i] = bih[i] + bhh[i]
	}
	if m.outW, err = get("model.decoder.decoder.2.weight", 1, hidden, 1); err != nil {
		return nil, err
	}
	ob, err := get("model.decoder.decoder.2.bias", 1)
	if err != nil {
		return nil, err
	}
	m.outBias = ob[0]
	return m, nil
}

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the bundled model (models.SileroVAD), parsed once.
func Default() (*Model, error) {
	defaultOnce.Do(func() { defaultModel, defaultErr = Parse(models.SileroVAD) })
	return defaultModel, defaultErr
}

// Detector runs the model on one stream of 16 kHz audio, WindowSize samples
// at a time, keeping the LSTM state and the context between windows.
type Detector struct {
	m    *Model
	x    [paddedSize]float32
	h, c [hidden]float32
	spec [bins * frames]float32
	a, b [128 * frames]float32 // encoder activations, ping-pong
	col  [bins * 3]float32     // one output step's input patch (conv1d.apply)
	gate [4 * hidden]float32
}

// NewDetector returns a detector in the start state (zero context and LSTM state).
func (m *Model) NewDetector() *Detector { return &Detector{m: m} }

// Reset returns d to the start state.
func (d *Detector) Reset() {
	clear(d.x[:contextSize])
	clear(d.h[:])
	clear(d.c[:])
}

// Window returns the speech probability of the next WindowSize samples of
// the stream, in [-1, 1] full scale. It does not allocate and does not keep
// window.
func (d *Detector) Window(window []float32) (float32, error) {
	if len(window) != WindowSize {
		return 0, fmt.Errorf("%w: got %d", ErrWindow, len(window))
	}
	m := d.m
	copy(d.x[contextSize:inputSize], window)
	// Reflection pad: x[inputSize+j] = x[inputSize-2-j].
	for j := range contextSize {
		d.x[inputSize+j] = d.x[inputSize-2-j]
	}
	// STFT magnitudes: spec[f*frames+t].
	for f := range bins {
		re := m.basis[f*fftSize : (f+1)*fftSize]
		im := m.basis[(bins+f)*fftSize : (bins+f+1)*fftSize]
		for t := range frames {
			seg := d.x[t*hop : t*hop+fftSize]
			r, i := dot2(re, im, seg)
			d.spec[f*frames+t] = float32(math.Sqrt(float64(r*r + i*i)))
		}
	}
	n := m.enc[0].apply(d.a[:], d.spec[:], d.col[:], frames)
	n = m.enc[1].apply(d.b[:], d.a[:], d.col[:], n)
	n = m.enc[2].apply(d.a[:], d.b[:], d.col[:], n)
	m.enc[3].apply(d.b[:], d.a[:], d.col[:], n) // one step: the LSTM input is d.b[:hidden]
	in := d.b[:hidden]

	for g := range 4 * hidden {
		d.gate[g] = m.bias[g] + dot(m.wih[g*hidden:(g+1)*hidden], in) + dot(m.whh[g*hidden:(g+1)*hidden], d.h[:])
	}
	out := m.outBias
	for j := range hidden {
		ig := sigmoid(d.gate[j])
		fg := sigmoid(d.gate[hidden+j])
		gg := float32(math.Tanh(float64(d.gate[2*hidden+j])))
		og := sigmoid(d.gate[3*hidden+j])
		d.c[j] = fg*d.c[j] + ig*gg
		d.h[j] = og * float32(math.Tanh(float64(d.c[j])))
		out += m.outW[j] * max(d.h[j], 0)
	}
	// The next window's context is this input's last contextSize samples.
	copy(d.x[:contextSize], d.x[inputSize-contextSize:inputSize])
	return sigmoid(out), nil
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// dot returns Σ a[i]·b[i] over len(a), with four partial sums so the
// adds pipeline.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+3 < len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot2 returns Σ re[i]·x[i] and Σ im[i]·x[i] in one pass over x.
func dot2(re, im, x []float32) (float32, float32) {
	im, x = im[:len(re)], x[:len(re)]
	var r0, r1, i0, i1 float32
	for k := 0; k+1 < len(re); k += 2 {
		r0 += re[k] * x[k]
		r1 += re[k+1] * x[k+1]
		i0 += im[k] * x[k]
		i1 += im[k+1] * x[k+1]
	}
	return r0 + r1, i0 + i1
}
