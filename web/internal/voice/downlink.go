package voice

import (
	"encoding/binary"
	"fmt"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Downlink turns the session's 20 ms output frames into wire packets: Opus
// packets of the transport's frame length (frames are gathered until one
// is full), or little-endian PCM16 bytes. A returned packet is valid until
// the next call. One goroutine owns a Downlink.
type Downlink struct {
	enc    *audio.OpusEncoder // nil for PCM16
	packet []byte
	frame  []int16 // a packet's samples being gathered (Opus frames over 20 ms)
	fill   int
	pcm    []byte
}

// NewOpusDownlink returns a Downlink of Opus packets of frameMs (20, 40 or
// 60) at rate.
func NewOpusDownlink(rate, bitrate, frameMs int) (*Downlink, error) {
	if frameMs%pipeline.FrameMs != 0 || frameMs < pipeline.FrameMs || frameMs > 60 {
		return nil, fmt.Errorf("%w: opus downlink frame %d ms (want 20, 40 or 60)", audio.ErrFrameSize, frameMs)
	}
	enc, err := audio.NewOpusEncoder(rate, bitrate)
	if err != nil {
		return nil, err
	}
	return &Downlink{enc: enc, packet: make([]byte, audio.MaxOpusPacket), frame: make([]int16, rate*frameMs/1000)}, nil
}

// NewPCMDownlink returns a Downlink of PCM16 bytes, one packet per frame.
func NewPCMDownlink() *Downlink { return &Downlink{} }

// Write adds one session frame. It returns the next packet, or nil while a
// longer Opus packet is still being gathered. An encoder error drops the
// frame (the caller counts it and carries on).
func (d *Downlink) Write(pcm []int16) ([]byte, error) {
	if d.enc == nil {
		if cap(d.pcm) < 2*len(pcm) {
			d.pcm = make([]byte, 2*len(pcm))
		}
		out := d.pcm[:2*len(pcm)]
		EncodePCM16(out, pcm)
		return out, nil
	}
	if d.fill == 0 && len(pcm) == len(d.frame) {
		return d.encode(pcm)
	}
	n := copy(d.frame[d.fill:], pcm)
	d.fill += n
	if d.fill < len(d.frame) {
		return nil, nil
	}
	d.fill = 0
	return d.encode(d.frame)
}

// Pending reports whether part of a packet is gathered.
func (d *Downlink) Pending() bool { return d.fill > 0 }

// Flush completes a gathered partial packet with silence and returns it
// (nil when nothing is pending): the end of an answer.
func (d *Downlink) Flush() ([]byte, error) {
	if d.fill == 0 {
		return nil, nil
	}
	clear(d.frame[d.fill:])
	d.fill = 0
	return d.encode(d.frame)
}

// Reset drops a gathered partial packet (a cut answer).
func (d *Downlink) Reset() { d.fill = 0 }

// FrameSamples is the packet length in samples (0 for PCM16, which takes
// any length).
func (d *Downlink) FrameSamples() int { return len(d.frame) }

func (d *Downlink) encode(pcm []int16) ([]byte, error) {
	n, err := d.enc.Encode(pcm, d.packet)
	if err != nil {
		return nil, err
	}
	return d.packet[:n], nil
}

// DecodePCM16 converts little-endian PCM16 bytes to samples;
// len(src) == 2*len(dst).
func DecodePCM16(dst []int16, src []byte) {
	for i := range dst {
		dst[i] = int16(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// EncodePCM16 converts samples to little-endian PCM16 bytes;
// len(dst) == 2*len(src).
func EncodePCM16(dst []byte, src []int16) {
	for i, s := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(s))
	}
}
