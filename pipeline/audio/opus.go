//go:build cgo

package audio

import (
	"fmt"

	"github.com/hraban/opus"
)

// MaxOpusPacket is a packet buffer size that always suffices for Encode
// (libopus's own recommendation for one frame is 4000 bytes).
const MaxOpusPacket = 4000

// OpusEncoder encodes mono PCM16 frames with libopus in VOIP mode. It wraps
// github.com/hraban/opus, whose state lives in Go memory, so there is
// nothing to close. Not safe for concurrent use: one goroutine owns it.
type OpusEncoder struct {
	enc        *opus.Encoder
	sampleRate int
}

// NewOpusEncoder returns a mono VOIP encoder at sampleRate (8000, 12000,
// 16000, 24000 or 48000) with the given bitrate in bit/s (500..512000;
// 24000 is transparent enough for speech and ASR, voice-engines.md §5.10).
func NewOpusEncoder(sampleRate, bitrate int) (*OpusEncoder, error) {
	if !ValidOpusRate(sampleRate) {
		return nil, fmt.Errorf("%w: opus encoder at %d Hz (want 8000, 12000, 16000, 24000 or 48000)", ErrSampleRate, sampleRate)
	}
	if bitrate < 500 || bitrate > 512000 {
		return nil, fmt.Errorf("%w: bitrate %d bit/s (want 500..512000)", ErrOpus, bitrate)
	}
	enc, err := opus.NewEncoder(sampleRate, 1, opus.AppVoIP)
	if err != nil {
		return nil, fmt.Errorf("%w: new encoder at %d Hz: %w", ErrOpus, sampleRate, err)
	}
	if err := enc.SetBitrate(bitrate); err != nil {
		return nil, fmt.Errorf("%w: set bitrate %d: %w", ErrOpus, bitrate, err)
	}
	return &OpusEncoder{enc: enc, sampleRate: sampleRate}, nil
}

// SampleRate returns the encoder's rate.
func (e *OpusEncoder) SampleRate() int { return e.sampleRate }

// SetComplexity sets libopus's computational complexity, 0 (cheapest) to
// 10 (its default, best quality per bit): a client that plays a device
// encodes as the device does.
func (e *OpusEncoder) SetComplexity(c int) error {
	if c < 0 || c > 10 {
		return fmt.Errorf("%w: complexity %d (want 0..10)", ErrOpus, c)
	}
	if err := e.enc.SetComplexity(c); err != nil {
		return fmt.Errorf("%w: set complexity %d: %w", ErrOpus, c, err)
	}
	return nil
}

// Encode encodes one frame (2.5, 5, 10, 20, 40 or 60 ms; the pipeline uses
// 20 ms) into dst and returns the packet length. dst should hold
// MaxOpusPacket bytes; a shorter one may fail with ErrOpus.
func (e *OpusEncoder) Encode(pcm []int16, dst []byte) (int, error) {
	if !validOpusFrame(e.sampleRate, len(pcm)) {
		return 0, fmt.Errorf("%w: %d samples at %d Hz (want 2.5, 5, 10, 20, 40 or 60 ms: %d for 20 ms)",
			ErrFrameSize, len(pcm), e.sampleRate, e.sampleRate/50)
	}
	if len(dst) == 0 {
		return 0, fmt.Errorf("%w: empty opus packet buffer (want %d bytes)", ErrBuffer, MaxOpusPacket)
	}
	// hraban/opus passes cap(dst) to libopus; limit it to len so libopus
	// never writes past what the caller handed over.
	n, err := e.enc.Encode(pcm, dst[:len(dst):len(dst)])
	if err != nil {
		return 0, fmt.Errorf("%w: encode %d samples: %w", ErrOpus, len(pcm), err)
	}
	return n, nil
}

// OpusDecoder decodes Opus packets to mono PCM16. Not safe for concurrent
// use: one goroutine owns it.
type OpusDecoder struct {
	dec        *opus.Decoder
	sampleRate int
	lastFrame  int // samples in the last decoded frame: the PLC length
}

// NewOpusDecoder returns a mono decoder producing sampleRate audio (8000,
// 12000, 16000, 24000 or 48000), whatever rate the packets were encoded at.
func NewOpusDecoder(sampleRate int) (*OpusDecoder, error) {
	if !ValidOpusRate(sampleRate) {
		return nil, fmt.Errorf("%w: opus decoder at %d Hz (want 8000, 12000, 16000, 24000 or 48000)", ErrSampleRate, sampleRate)
	}
	dec, err := opus.NewDecoder(sampleRate, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: new decoder at %d Hz: %w", ErrOpus, sampleRate, err)
	}
	return &OpusDecoder{dec: dec, sampleRate: sampleRate, lastFrame: sampleRate / 50}, nil
}

// SampleRate returns the decoder's output rate.
func (d *OpusDecoder) SampleRate() int { return d.sampleRate }

// Decode decodes one packet into dst and returns the samples written. dst
// must hold the packet's duration (120 ms, sampleRate*3/25 samples, always
// suffices). A nil or empty packet means the packet was lost: Decode then
// conceals it (libopus PLC) with one frame as long as the last decoded one,
// so the stream keeps its timing.
func (d *OpusDecoder) Decode(packet []byte, dst []int16) (int, error) {
	if len(packet) == 0 {
		n := d.lastFrame
		if len(dst) < n {
			return 0, fmt.Errorf("%w: %d samples for a %d-sample concealment frame", ErrBuffer, len(dst), n)
		}
		// PLC length is taken from the buffer's capacity: make it exact.
		if err := d.dec.DecodePLC(dst[:n:n]); err != nil {
			return 0, fmt.Errorf("%w: conceal lost packet: %w", ErrOpus, err)
		}
		return n, nil
	}
	if len(dst) == 0 {
		return 0, fmt.Errorf("%w: empty pcm buffer", ErrBuffer)
	}
	n, err := d.dec.Decode(packet, dst[:len(dst):len(dst)])
	if err != nil {
		return 0, fmt.Errorf("%w: decode %d-byte packet into %d samples: %w", ErrOpus, len(packet), len(dst), err)
	}
	d.lastFrame = n
	return n, nil
}
