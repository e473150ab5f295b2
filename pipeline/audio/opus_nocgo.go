//go:build !cgo

package audio

// MaxOpusPacket is a packet buffer size that always suffices for Encode.
const MaxOpusPacket = 4000

// OpusEncoder is unavailable without cgo: every method returns ErrNoCgo.
type OpusEncoder struct{ sampleRate int }

// NewOpusEncoder returns ErrNoCgo in builds without cgo.
func NewOpusEncoder(sampleRate, bitrate int) (*OpusEncoder, error) { return nil, ErrNoCgo }

// SampleRate returns the encoder's rate.
func (e *OpusEncoder) SampleRate() int { return e.sampleRate }

// SetComplexity returns ErrNoCgo.
func (e *OpusEncoder) SetComplexity(int) error { return ErrNoCgo }

// Encode returns ErrNoCgo.
func (e *OpusEncoder) Encode(pcm []int16, dst []byte) (int, error) { return 0, ErrNoCgo }

// OpusDecoder is unavailable without cgo: every method returns ErrNoCgo.
type OpusDecoder struct{ sampleRate int }

// NewOpusDecoder returns ErrNoCgo in builds without cgo.
func NewOpusDecoder(sampleRate int) (*OpusDecoder, error) { return nil, ErrNoCgo }

// SampleRate returns the decoder's output rate.
func (d *OpusDecoder) SampleRate() int { return d.sampleRate }

// Decode returns ErrNoCgo.
func (d *OpusDecoder) Decode(packet []byte, dst []int16) (int, error) { return 0, ErrNoCgo }
