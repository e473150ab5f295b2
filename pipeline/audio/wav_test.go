package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

func encodeWAV(t testing.TB, samples []int16, rate, channels int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := EncodeWAV(&b, samples, rate, channels); err != nil {
		t.Fatalf("EncodeWAV: %v", err)
	}
	return b.Bytes()
}

func TestWAVRoundTrip(t *testing.T) {
	cases := []struct {
		rate, channels int
		samples        []int16
	}{
		{16000, 1, sine(1600, 440, 20000, 16000)},
		{44100, 2, sine(882, 1000, 32767, 44100)},
		{8000, 1, []int16{-32768, 32767, 0, -1, 1}},
		{48000, 1, nil},
		{22050, 6, make([]int16, 60)},
	}
	for _, tc := range cases {
		data := encodeWAV(t, tc.samples, tc.rate, tc.channels)
		if len(data) != 44+2*len(tc.samples) {
			t.Errorf("%d Hz %d ch: %d bytes, want a 44-byte header + data", tc.rate, tc.channels, len(data))
		}
		w, err := DecodeWAV(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%d Hz %d ch: DecodeWAV: %v", tc.rate, tc.channels, err)
		}
		if w.SampleRate != tc.rate || w.Channels != tc.channels || len(w.Samples) != len(tc.samples) {
			t.Fatalf("decoded %d Hz %d ch %d samples, want %d Hz %d ch %d", w.SampleRate, w.Channels, len(w.Samples), tc.rate, tc.channels, len(tc.samples))
		}
		for i := range tc.samples {
			if w.Samples[i] != tc.samples[i] {
				t.Fatalf("sample %d = %d, want %d", i, w.Samples[i], tc.samples[i])
			}
		}
	}
}

func TestWAVMono(t *testing.T) {
	w := &WAV{SampleRate: 8000, Channels: 2, Samples: []int16{100, 300, -32768, -32768, 32767, 32767, 1, -2}}
	got := w.Mono()
	want := []int16{200, -32768, 32767, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Mono() = %v, want %v", got, want)
		}
	}
	mono := &WAV{SampleRate: 8000, Channels: 1, Samples: []int16{1, 2}}
	if &mono.Mono()[0] != &mono.Samples[0] {
		t.Error("Mono() of mono audio copied the samples")
	}
}

// chunkBytes builds one RIFF chunk (with its pad byte for odd sizes).
func chunkBytes(id string, body []byte) []byte {
	b := append([]byte(id), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	b = append(b, body...)
	if len(body)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

func riff(chunks ...[]byte) []byte {
	body := []byte("WAVE")
	for _, c := range chunks {
		body = append(body, c...)
	}
	return append(chunkBytes("RIFF", body)[:8], body...)
}

// fmtPCM builds a fmt chunk body.
func fmtPCM(format uint16, channels uint16, rate uint32, bits uint16) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b[0:], format)
	binary.LittleEndian.PutUint16(b[2:], channels)
	binary.LittleEndian.PutUint32(b[4:], rate)
	binary.LittleEndian.PutUint32(b[8:], rate*uint32(channels)*uint32(bits/8))
	binary.LittleEndian.PutUint16(b[12:], channels*bits/8)
	binary.LittleEndian.PutUint16(b[14:], bits)
	return b
}

// fmtExtensible builds a WAVE_FORMAT_EXTENSIBLE fmt body with the given
// subformat code in the standard GUID.
func fmtExtensible(channels uint16, rate uint32, sub uint16) []byte {
	b := fmtPCM(0xFFFE, channels, rate, 16)
	b = append(b,
		22, 0, // cbSize
		16, 0, // valid bits per sample
		0x04, 0, 0, 0, // channel mask: front centre
		byte(sub), byte(sub>>8), 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, // subformat GUID
		0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71,
	)
	return b
}

func pcmBytes(s ...int16) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

func TestWAVExtensibleAndUnknownChunks(t *testing.T) {
	data := riff(
		chunkBytes("LIST", []byte("INFOISFT\x05\x00\x00\x00sox!\x00")), // odd size: padded
		chunkBytes("fmt ", fmtExtensible(1, 24000, 1)),
		chunkBytes("fact", []byte{3, 0, 0, 0}),
		chunkBytes("junk", []byte{1, 2, 3}),
		chunkBytes("data", pcmBytes(7, -7, 32767)),
		chunkBytes("id3 ", []byte("trailing metadata")),
	)
	w, err := DecodeWAV(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("DecodeWAV: %v", err)
	}
	if w.SampleRate != 24000 || w.Channels != 1 || len(w.Samples) != 3 || w.Samples[2] != 32767 {
		t.Fatalf("got %+v", w)
	}
}

func TestWAVStreamingSize(t *testing.T) {
	// Streaming writers leave a placeholder data size: read to EOF.
	for _, size := range [][4]byte{
		{0xff, 0xff, 0xff, 0xff}, // ffmpeg
		{0x00, 0xf0, 0xff, 0x7f}, // 0x7FFFF000: espeak-ng --stdout, sox to a pipe
	} {
		hdr := riff(chunkBytes("fmt ", fmtPCM(1, 1, 16000, 16)))
		hdr = append(hdr, 'd', 'a', 't', 'a', size[0], size[1], size[2], size[3])
		data := append(hdr, pcmBytes(1, 2, 3, 4)...)
		data = append(data, 0x05) // half a sample: dropped
		w, err := DecodeWAV(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("size % x: DecodeWAV: %v", size, err)
		}
		if len(w.Samples) != 4 || w.Samples[3] != 4 {
			t.Fatalf("size % x: samples %v, want [1 2 3 4]", size, w.Samples)
		}
	}
}

func TestWAVSoxFiles(t *testing.T) {
	for _, tc := range []struct {
		file           string
		rate, channels int
		frames         int
		err            error
		msg            string
	}{
		{file: "sox-mono16k.wav", rate: 16000, channels: 1, frames: 800},
		{file: "sox-3ch48k-extensible.wav", rate: 48000, channels: 3, frames: 960},
		{file: "sox-float.wav", err: ErrWAVFormat, msg: "0x0003 (IEEE float)"},
		{file: "sox-ulaw.wav", err: ErrWAVFormat, msg: "0x0007 (mu-law)"},
	} {
		f, err := os.Open("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		w, err := DecodeWAV(f)
		f.Close()
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: error %v, want %v naming %q", tc.file, err, tc.err, tc.msg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if w.SampleRate != tc.rate || w.Channels != tc.channels || len(w.Samples) != tc.frames*tc.channels {
			t.Errorf("%s: %d Hz %d ch %d samples, want %d Hz %d ch %d frames", tc.file, w.SampleRate, w.Channels, len(w.Samples), tc.rate, tc.channels, tc.frames)
		}
	}
}

func TestWAVErrors(t *testing.T) {
	good := encodeWAV(t, []int16{1, 2, 3, 4}, 16000, 1)
	cases := []struct {
		name string
		data []byte
		err  error
		msg  string
	}{
		{"empty", nil, ErrNotRIFF, "shorter than"},
		{"ogg", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00"), ErrNotRIFF, `"OggS"`},
		{"rifx", append([]byte("RIFX"), good[4:]...), ErrNotRIFF, "RIFX"},
		{"avi", append(append([]byte{}, good[:8]...), []byte("AVI ")...), ErrNotRIFF, "AVI"},
		{"float", riff(chunkBytes("fmt ", fmtPCM(3, 1, 16000, 32)), chunkBytes("data", nil)), ErrWAVFormat, "format code 0x0003 (IEEE float)"},
		{"adpcm", riff(chunkBytes("fmt ", fmtPCM(2, 1, 16000, 4))), ErrWAVFormat, "0x0002 (MS ADPCM)"},
		{"8bit", riff(chunkBytes("fmt ", fmtPCM(1, 1, 8000, 8))), ErrWAVFormat, "8 bits"},
		{"24bit", riff(chunkBytes("fmt ", fmtPCM(1, 2, 48000, 24))), ErrWAVFormat, "24 bits"},
		{"extensible float", riff(chunkBytes("fmt ", fmtExtensible(1, 48000, 3))), ErrWAVFormat, "subformat 0x0003 (IEEE float)"},
		{"zero channels", riff(chunkBytes("fmt ", fmtPCM(1, 0, 16000, 16))), ErrChannels, "0 channels"},
		{"zero rate", riff(chunkBytes("fmt ", fmtPCM(1, 1, 0, 16))), ErrSampleRate, "0 Hz"},
		{"short fmt", riff(chunkBytes("fmt ", []byte{1, 0, 1, 0})), ErrWAVFormat, "4 bytes"},
		{"no fmt", riff(chunkBytes("data", pcmBytes(1, 2))), ErrWAVFormat, "before any fmt"},
		{"no data", riff(chunkBytes("fmt ", fmtPCM(1, 1, 16000, 16))), ErrTruncated, "no data chunk"},
		{"truncated data", good[:len(good)-3], ErrTruncated, "declares 8 bytes, stream holds 5"},
		{"truncated header", good[:30], ErrTruncated, "fmt chunk"},
		{"truncated chunk header", good[:40], ErrTruncated, "chunk header cut"},
		{"odd data", riff(chunkBytes("fmt ", fmtPCM(1, 2, 16000, 16)), chunkBytes("data", pcmBytes(1, 2, 3))), ErrTruncated, "not whole 2-channel"},
		{"huge skipped chunk", riff(chunkBytes("fmt ", fmtPCM(1, 1, 16000, 16)), []byte("LIST\xff\xff\xff\x7f")), ErrTruncated, `"LIST" chunk`},
	}
	for _, tc := range cases {
		_, err := DecodeWAV(bytes.NewReader(tc.data))
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %v containing %q", tc.name, err, tc.err, tc.msg)
		}
	}
}

func TestEncodeWAVErrors(t *testing.T) {
	var b bytes.Buffer
	if err := EncodeWAV(&b, []int16{1}, 16000, 0); !errors.Is(err, ErrChannels) {
		t.Errorf("0 channels: %v, want ErrChannels", err)
	}
	if err := EncodeWAV(&b, []int16{1, 2, 3}, 16000, 2); !errors.Is(err, ErrChannels) {
		t.Errorf("odd stereo: %v, want ErrChannels", err)
	}
	if err := EncodeWAV(&b, []int16{1}, 0, 1); !errors.Is(err, ErrSampleRate) {
		t.Errorf("0 Hz: %v, want ErrSampleRate", err)
	}
}

// FuzzDecodeWAV: DecodeWAV never panics or over-allocates, and whatever
// it accepts is consistent and survives a round trip. Seeds are committed
// under testdata/fuzz/FuzzDecodeWAV.
func FuzzDecodeWAV(f *testing.F) {
	f.Add(encodeWAV(f, []int16{1, -1, 300, -300}, 16000, 2))
	f.Add(riff(chunkBytes("fmt ", fmtExtensible(1, 8000, 1)), chunkBytes("data", pcmBytes(5))))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := DecodeWAV(bytes.NewReader(data))
		if err != nil {
			if w != nil {
				t.Fatal("non-nil WAV with an error")
			}
			return
		}
		if w.Channels < 1 || w.SampleRate < 1 || len(w.Samples)%w.Channels != 0 {
			t.Fatalf("accepted inconsistent WAV: %d Hz %d ch %d samples", w.SampleRate, w.Channels, len(w.Samples))
		}
		if 2*len(w.Samples) > len(data) {
			t.Fatalf("%d samples from %d bytes", len(w.Samples), len(data))
		}
		again, err := DecodeWAV(bytes.NewReader(encodeWAV(t, w.Samples, w.SampleRate, w.Channels)))
		if err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
		if again.SampleRate != w.SampleRate || again.Channels != w.Channels || len(again.Samples) != len(w.Samples) {
			t.Fatal("round trip changed the WAV")
		}
		_ = w.Mono()
	})
}
