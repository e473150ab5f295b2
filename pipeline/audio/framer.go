package audio

// Framer cuts a stream of arbitrary-size PCM writes into fixed frames.
type Framer struct {
	buf []int16 // a partial frame carried between writes; cap is the frame size
}

// NewFramer returns a Framer emitting frames of frameSamples samples
// (320 for 20 ms at 16 kHz). frameSamples below 1 is treated as 1.
func NewFramer(frameSamples int) *Framer {
	return &Framer{buf: make([]int16, 0, max(frameSamples, 1))}
}

// FrameSamples returns the frame length.
func (f *Framer) FrameSamples() int { return cap(f.buf) }

// Buffered returns how many samples wait for the next frame.
func (f *Framer) Buffered() int { return len(f.buf) }

// Write calls emit for every complete frame; frame is a reused buffer (emit
// must not retain it). Whole frames lying inside pcm are passed without a
// copy (capacity-limited, so emit cannot append into pcm); only a frame
// straddling two writes goes through the internal buffer.
func (f *Framer) Write(pcm []int16, emit func(frame []int16)) {
	size := cap(f.buf)
	if len(f.buf) > 0 {
		n := copy(f.buf[len(f.buf):size], pcm)
		f.buf = f.buf[:len(f.buf)+n]
		pcm = pcm[n:]
		if len(f.buf) < size {
			return
		}
		emit(f.buf)
		f.buf = f.buf[:0]
	}
	for len(pcm) >= size {
		emit(pcm[:size:size])
		pcm = pcm[size:]
	}
	f.buf = append(f.buf, pcm...)
}

// Reset drops any partial frame.
func (f *Framer) Reset() { f.buf = f.buf[:0] }
