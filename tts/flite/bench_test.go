//go:build cgo

package flite

import (
	"testing"

	engine "github.com/voxpipe/voxpipe/cgo/flite"
	"github.com/voxpipe/voxpipe/tts/ttstest"
)

func BenchmarkSynthesize(b *testing.B) {
	for _, voice := range engine.Voices() {
		b.Run(voice, func(b *testing.B) {
			s, err := New(Config{Voice: voice, Rate: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ttstest.Benchmark(b, s)
		})
	}
}
