package audio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// WAV is decoded PCM16 audio.
type WAV struct {
	SampleRate, Channels int
	Samples              []int16 // interleaved
}

// WAV format codes (the fmt chunk's wFormatTag).
const (
	wavFormatPCM        = 0x0001
	wavFormatExtensible = 0xFFFE
)

// wavSubformatPCMTail is bytes 2..15 of KSDATAFORMAT_SUBTYPE_PCM
// (00000001-0000-0010-8000-00aa00389b71); bytes 0..1 hold the format code.
var wavSubformatPCMTail = [14]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71}

// wavFormatName names common format codes in error messages.
func wavFormatName(code uint16) string {
	switch code {
	case 0x0001:
		return "PCM"
	case 0x0002:
		return "MS ADPCM"
	case 0x0003:
		return "IEEE float"
	case 0x0006:
		return "A-law"
	case 0x0007:
		return "mu-law"
	case 0x0011:
		return "IMA ADPCM"
	case 0x0055:
		return "MP3"
	case 0xFFFE:
		return "extensible"
	}
	return "unknown"
}

// wavStreamingSize: writers that cannot seek back (espeak-ng --stdout,
// sox to a pipe, ffmpeg) put a placeholder of 0x7FFFF000 or 0xFFFFFFFF in
// the data size. A real data chunk this large (2 GiB) would be read to the
// end of the stream anyway.
const wavStreamingSize = 0x7FFFF000

// maxWAVChannels bounds the channel count accepted (WAVE_FORMAT_EXTENSIBLE
// allows up to 18 named speakers).
const maxWAVChannels = 32

// DecodeWAV reads a RIFF/WAVE stream holding 16-bit PCM (format code 1, or
// WAVE_FORMAT_EXTENSIBLE with the PCM subformat), any rate and channel
// count. Chunks other than fmt and data are skipped. A data chunk whose
// size field is a streaming placeholder (0x7FFFF000 or more, written by
// encoders that could not seek back) runs to the end of the stream; any other data chunk
// shorter than declared is an ErrTruncated error.
func DecodeWAV(r io.Reader) (*WAV, error) {
	br := bufio.NewReader(r)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: stream is shorter than the 12-byte RIFF header", ErrNotRIFF)
		}
		return nil, fmt.Errorf("audio: wav: read header: %w", err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil, fmt.Errorf("%w: starts with %q...%q, want \"RIFF\"...\"WAVE\"", ErrNotRIFF, hdr[0:4], hdr[8:12])
	}

	var (
		w       WAV
		haveFmt bool
		offset  int64 = 12
	)
	for {
		var ch [8]byte
		if _, err := io.ReadFull(br, ch[:]); err != nil {
			if errors.Is(err, io.EOF) {
				if !haveFmt {
					return nil, fmt.Errorf("%w: no fmt chunk before the end of the stream", ErrTruncated)
				}
				return nil, fmt.Errorf("%w: no data chunk before the end of the stream", ErrTruncated)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: chunk header cut at byte %d", ErrTruncated, offset)
			}
			return nil, fmt.Errorf("audio: wav: read chunk header at byte %d: %w", offset, err)
		}
		id := string(ch[0:4])
		size := binary.LittleEndian.Uint32(ch[4:8])
		offset += 8
		switch id {
		case "fmt ":
			if err := w.parseFmt(br, size, offset); err != nil {
				return nil, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, fmt.Errorf("%w: data chunk at byte %d before any fmt chunk", ErrWAVFormat, offset-8)
			}
			if err := w.readData(br, size, offset); err != nil {
				return nil, err
			}
			return &w, nil
		default:
			if err := skipChunk(br, int64(size)+int64(size&1)); err != nil {
				return nil, fmt.Errorf("%w: %q chunk at byte %d declares %d bytes", ErrTruncated, id, offset-8, size)
			}
		}
		offset += int64(size) + int64(size&1)
	}
}

func (w *WAV) parseFmt(r io.Reader, size uint32, offset int64) error {
	if size < 16 {
		return fmt.Errorf("%w: fmt chunk at byte %d is %d bytes, want at least 16", ErrWAVFormat, offset-8, size)
	}
	if size > 1024 {
		return fmt.Errorf("%w: fmt chunk at byte %d is %d bytes, implausibly large", ErrWAVFormat, offset-8, size)
	}
	buf := make([]byte, int(size)+int(size&1))
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("%w: fmt chunk at byte %d cut short", ErrTruncated, offset-8)
	}
	format := binary.LittleEndian.Uint16(buf[0:2])
	channels := int(binary.LittleEndian.Uint16(buf[2:4]))
	rate := binary.LittleEndian.Uint32(buf[4:8])
	blockAlign := int(binary.LittleEndian.Uint16(buf[12:14]))
	bits := int(binary.LittleEndian.Uint16(buf[14:16]))

	if format == wavFormatExtensible {
		if size < 40 {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE fmt chunk is %d bytes, want 40", ErrWAVFormat, size)
		}
		// buf[16:18] cbSize, [18:20] valid bits, [20:24] channel mask, [24:40] subformat GUID.
		sub := binary.LittleEndian.Uint16(buf[24:26])
		if !bytes.Equal(buf[26:40], wavSubformatPCMTail[:]) {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE with a non-standard subformat GUID (want PCM16)", ErrWAVFormat)
		}
		if sub != wavFormatPCM {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE subformat 0x%04x (%s), want PCM16", ErrWAVFormat, sub, wavFormatName(sub))
		}
		format = sub
	}
	if format != wavFormatPCM {
		return fmt.Errorf("%w: format code 0x%04x (%s), want 0x0001 PCM16", ErrWAVFormat, format, wavFormatName(format))
	}
	if bits != 16 {
		return fmt.Errorf("%w: PCM with %d bits per sample, want 16", ErrWAVFormat, bits)
	}
	if channels == 0 || channels > maxWAVChannels {
		return fmt.Errorf("%w: %d channels in the fmt chunk (want 1..%d)", ErrChannels, channels, maxWAVChannels)
	}
	if rate == 0 || rate > 1_000_000 {
		return fmt.Errorf("%w: %d Hz in the fmt chunk", ErrSampleRate, rate)
	}
	if blockAlign != 2*channels {
		return fmt.Errorf("%w: block align %d for %d PCM16 channels, want %d", ErrWAVFormat, blockAlign, channels, 2*channels)
	}
	w.SampleRate, w.Channels = int(rate), channels
	return nil
}

// readData reads the data chunk into w.Samples without trusting the
// declared size for the allocation (a hostile header cannot make it
// reserve more than the stream actually holds, plus 1 MiB).
func (w *WAV) readData(r io.Reader, size uint32, offset int64) error {
	toEOF := size >= wavStreamingSize
	var data bytes.Buffer
	if toEOF {
		if _, err := data.ReadFrom(r); err != nil {
			return fmt.Errorf("audio: wav: read data chunk at byte %d: %w", offset-8, err)
		}
	} else {
		data.Grow(int(min(int64(size), 1<<20)))
		n, err := io.CopyN(&data, r, int64(size))
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: data chunk at byte %d declares %d bytes, stream holds %d", ErrTruncated, offset-8, size, n)
			}
			return fmt.Errorf("audio: wav: read data chunk at byte %d: %w", offset-8, err)
		}
	}
	b := data.Bytes()
	frameBytes := 2 * w.Channels
	if len(b)%frameBytes != 0 {
		if !toEOF {
			return fmt.Errorf("%w: data chunk of %d bytes is not whole %d-channel PCM16 frames", ErrTruncated, len(b), w.Channels)
		}
		b = b[:len(b)-len(b)%frameBytes] // a streamed file cut mid-frame: drop the partial frame
	}
	w.Samples = make([]int16, len(b)/2)
	for i := range w.Samples {
		w.Samples[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return nil
}

func skipChunk(r io.Reader, n int64) error {
	m, err := io.CopyN(io.Discard, r, n)
	if m == n {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Mono returns the samples with channels averaged. For mono audio it
// returns w.Samples itself (no copy).
func (w *WAV) Mono() []int16 {
	if w.Channels <= 1 {
		return w.Samples
	}
	frames := len(w.Samples) / w.Channels
	out := make([]int16, frames)
	for i := range out {
		var sum int32
		for _, s := range w.Samples[i*w.Channels : (i+1)*w.Channels] {
			sum += int32(s)
		}
		out[i] = int16(sum / int32(w.Channels))
	}
	return out
}

// Duration returns the length of the audio in seconds.
func (w *WAV) Duration() float64 {
	if w.Channels <= 0 || w.SampleRate <= 0 {
		return 0
	}
	return float64(len(w.Samples)/w.Channels) / float64(w.SampleRate)
}

// EncodeWAV writes samples (interleaved PCM16) as a canonical 44-byte-header
// RIFF/WAVE PCM file.
func EncodeWAV(w io.Writer, samples []int16, sampleRate, channels int) error {
	if channels < 1 || channels > maxWAVChannels {
		return fmt.Errorf("%w: %d channels (want 1..%d)", ErrChannels, channels, maxWAVChannels)
	}
	if sampleRate < 1 || sampleRate > 1_000_000 {
		return fmt.Errorf("%w: %d Hz for a WAV file", ErrSampleRate, sampleRate)
	}
	if len(samples)%channels != 0 {
		return fmt.Errorf("%w: %d samples are not whole %d-channel frames", ErrChannels, len(samples), channels)
	}
	dataBytes := uint64(len(samples)) * 2
	if dataBytes > math.MaxUint32-36 {
		return fmt.Errorf("audio: wav: %d bytes of samples exceed the RIFF 4 GiB limit", dataBytes)
	}
	var hdr [44]byte
	copy(hdr[0:4], "RIFF")
	binary.LittleEndian.PutUint32(hdr[4:8], uint32(36+dataBytes))
	copy(hdr[8:16], "WAVEfmt ")
	binary.LittleEndian.PutUint32(hdr[16:20], 16)
	binary.LittleEndian.PutUint16(hdr[20:22], wavFormatPCM)
	binary.LittleEndian.PutUint16(hdr[22:24], uint16(channels))
	binary.LittleEndian.PutUint32(hdr[24:28], uint32(sampleRate))
	binary.LittleEndian.PutUint32(hdr[28:32], uint32(sampleRate*channels*2))
	binary.LittleEndian.PutUint16(hdr[32:34], uint16(channels*2))
	binary.LittleEndian.PutUint16(hdr[34:36], 16)
	copy(hdr[36:40], "data")
	binary.LittleEndian.PutUint32(hdr[40:44], uint32(dataBytes))
	if _, err := w.Write(hdr[:]); err != nil {
		return fmt.Errorf("audio: wav: write header: %w", err)
	}
	var buf [4096]byte
	for len(samples) > 0 {
		n := min(len(samples), len(buf)/2)
		for i, s := range samples[:n] {
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(s))
		}
		if _, err := w.Write(buf[:2*n]); err != nil {
			return fmt.Errorf("audio: wav: write samples: %w", err)
		}
		samples = samples[n:]
	}
	return nil
}
