package web

import (
	"encoding/json"
	"testing"
)

// The per-frame work of the transport: bytes of one 20 ms frame at 48 kHz
// to samples (reader) and back (writer).
func BenchmarkDecodePCM16Frame(b *testing.B) {
	src := make([]byte, 1920)
	dst := make([]int16, 960)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		decodePCM16(dst, src)
	}
}

func BenchmarkEncodePCM16Frame(b *testing.B) {
	src := make([]int16, 960)
	dst := make([]byte, 1920)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		encodePCM16(dst, src)
	}
}

// FuzzClientMessage feeds arbitrary text frames through the parsing and
// start validation the reader does: never a panic, and an accepted start
// always names a supported format.
func FuzzClientMessage(f *testing.F) {
	f.Add([]byte(`{"type":"start","sample_rate":16000,"encoding":"pcm16"}`))
	f.Add([]byte(`{"type":"start","sample_rate":48000,"encoding":"opus","output_sample_rate":24000}`))
	f.Add([]byte(`{"type":"interrupt","turn":3,"played_ms":1234.5}`))
	f.Add([]byte(`{"type":5}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var msg clientMessage
		if json.Unmarshal(data, &msg) != nil || msg.Type != ClientStart {
			return
		}
		enc, out, problem := validateStart(msg)
		if problem != "" {
			return
		}
		if (enc != EncodingPCM16 && enc != EncodingOpus) || out < 8000 || out > 48000 || msg.SampleRate < 8000 || msg.SampleRate > 48000 {
			t.Fatalf("accepted %q as %s in, %d out", data, enc, out)
		}
	})
}
