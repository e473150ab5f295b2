package volcproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The byte layouts of the doc's section 4.2 and 2, written out by hand.
func TestDocLayouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		want Frame
	}{
		{"StartConnection", "11 14 10 00 00000001 00000002 7b7d",
			Frame{Type: TypeFullClient, Flags: FlagEvent, Serial: SerialJSON, Event: 1, Payload: []byte("{}")}},
		{"StartSession", "11 14 10 00 00000064 00000002 7331 00000002 7b7d",
			Frame{Type: TypeFullClient, Flags: FlagEvent, Serial: SerialJSON, Event: 100, ID: "s1", Payload: []byte("{}")}},
		{"TTSResponse", "11 b4 00 00 00000160 00000002 7331 00000003 010203",
			Frame{Type: TypeAudioServer, Flags: FlagEvent, Event: 352, ID: "s1", Payload: []byte{1, 2, 3}}},
		{"Error", "11 f0 10 00 02faf0c9 00000002 7b7d",
			Frame{Type: TypeError, Serial: SerialJSON, Code: 50000073, Payload: []byte("{}")}},
		{"last audio, negative sequence", "11 23 00 00 fffffffa 00000001 07",
			Frame{Type: TypeAudioClient, Flags: FlagSeq | FlagLast, Seq: -6, Payload: []byte{7}}},
		{"TTS v1 audio with sequence", "11 b1 00 00 00000002 00000002 0a0b",
			Frame{Type: TypeAudioServer, Flags: FlagSeq, Seq: 2, Payload: []byte{10, 11}}},
		{"ACK", "11 b0 00 00", Frame{Type: TypeAudioServer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := mustHex(t, tc.hex)
			got, err := Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Payload == nil && len(got.Payload) == 0 {
				got.Payload = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tc.want)
			}
			if tc.name == "ACK" {
				return
			}
			enc, err := Encode(tc.want)
			if err != nil || !bytes.Equal(enc, raw) {
				t.Fatalf("Encode = %x, %v; want %x", enc, err, raw)
			}
		})
	}
}

func TestGzipRoundTrip(t *testing.T) {
	f := Frame{Type: TypeFullServer, Flags: FlagSeq | FlagLast, Serial: SerialJSON, Comp: CompGzip, Seq: -3, Payload: []byte(`{"result":{"text":"hello"}}`)}
	b, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	// header, sequence, size, then a gzip stream (magic 1f 8b)
	if !bytes.Equal(b[:4], []byte{0x11, 0x93, 0x11, 0}) || !bytes.Equal(b[12:14], []byte{0x1f, 0x8b}) {
		t.Fatalf("header %x / payload %x not gzip", b[:4], b[12:14])
	}
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, f) || !got.Last() {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	// An empty payload is still a valid gzip stream.
	e, _ := Encode(Frame{Type: TypeAudioClient, Flags: FlagLast, Comp: CompGzip})
	if got, err := Decode(e); err != nil || len(got.Payload) != 0 {
		t.Fatalf("empty gzip: %+v %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want error
	}{
		{"11 90", ErrShort},
		{"21 90 10 00 00000000", ErrVersion},
		{"10 90 10 00 00000000", ErrSize},
		{"11 91 10 00 00000001", ErrShort},            // sequence but no size
		{"11 90 10 00 00000009 7b7d", ErrSize},        // size beyond the frame
		{"11 94 10 00 00000096 ffffffff 00", ErrSize}, // id size beyond the frame
		{"12 90 10 00 00000000", ErrShort},            // header of 2 words, only 1
		{"11 90 11 00 00000003 010203", nil},          // not gzip: checked below
	} {
		_, err := Decode(mustHex(t, tc.hex))
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "gzip") {
				t.Errorf("%s: err %v, want a gzip error", tc.hex, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.hex, err, tc.want)
		}
	}
}

func TestHeaderExtensionSkipped(t *testing.T) {
	f, err := Decode(mustHex(t, "12 90 10 00 aabbccdd 00000002 7b7d"))
	if err != nil || string(f.Payload) != "{}" {
		t.Fatalf("%+v %v", f, err)
	}
}

func TestServerErrorText(t *testing.T) {
	e := &ServerError{Service: "volc asr", Code: 55000031, Message: "overloaded"}
	if s := e.Error(); s != "volc asr: server error 55000031 (server busy): overloaded" {
		t.Fatal(s)
	}
}

// FuzzDecode: no input panics or allocates past the limits, and whatever
// decodes re-encodes to a frame that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"11 14 10 00 00000001 00000002 7b7d",
		"11 14 10 00 00000064 00000002 7331 00000002 7b7d",
		"11 94 10 00 00000032 00000003 636964 00000002 7b7d",
		"11 b4 00 00 00000160 00000002 7331 00000003 010203",
		"11 f0 10 00 02faf0c9 00000002 7b7d",
		"11 23 00 00 fffffffa 00000001 07",
		"11 b1 00 00 00000002 00000002 0a0b",
		"11 b0 00 00",
		"12 90 10 00 aabbccdd 00000002 7b7d",
	} {
		f.Add(mustHex(f, s))
	}
	gz, _ := Encode(Frame{Type: TypeFullServer, Flags: FlagSeq, Serial: SerialJSON, Comp: CompGzip, Seq: 1, Payload: []byte(`{"result":{"text":"hi"}}`)})
	f.Add(gz)
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			return
		}
		if len(fr.Payload) > MaxPayload {
			t.Fatalf("payload of %d bytes", len(fr.Payload))
		}
		enc, err := Encode(fr)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", fr, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode of re-encoded %x: %v", enc, err)
		}
		if len(fr.Payload) == 0 {
			fr.Payload, again.Payload = nil, nil
		}
		if !reflect.DeepEqual(fr, again) {
			t.Fatalf("round trip: %+v != %+v", fr, again)
		}
	})
}

// BenchmarkEncodeAudioPacket is the ASR's per-packet cost: 200 ms of
// 16 kHz PCM, gzipped.
func BenchmarkEncodeAudioPacket(b *testing.B) {
	pcm := make([]byte, 6400)
	for i := range pcm {
		pcm[i] = byte(i * 7)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(Frame{Type: TypeAudioClient, Flags: FlagSeq, Comp: CompGzip, Seq: 2, Payload: pcm}); err != nil {
			b.Fatal(err)
		}
	}
}
