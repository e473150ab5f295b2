package web

import (
	"testing"

	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// The per-frame work of the transport: bytes of one 20 ms frame at 48 kHz
// to samples (reader) and back (writer).
func BenchmarkDecodePCM16Frame(b *testing.B) {
	src := make([]byte, 1920)
	dst := make([]int16, 960)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		voice.DecodePCM16(dst, src)
	}
}

func BenchmarkEncodePCM16Frame(b *testing.B) {
	src := make([]int16, 960)
	dst := make([]byte, 1920)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		voice.EncodePCM16(dst, src)
	}
}
