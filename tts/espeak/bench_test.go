//go:build cgo

package espeak

import (
	"testing"

	"github.com/voxpipe/voxpipe/tts/ttstest"
)

func BenchmarkSynthesize(b *testing.B) {
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ttstest.Benchmark(b, s)
}
