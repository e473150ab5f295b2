package tokenizer

import (
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

const benchText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. "

func BenchmarkEncodeSPM(b *testing.B) {
	dir := sharedLLMDir(b)
	f, err := gguf.Open(dir + "/stories260K-f32.gguf")
	if err != nil {
		b.Skipf("fixture unavailable: %v", err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(benchText, 8)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text, true, false)
	}
}

func BenchmarkEncodeBPE(b *testing.B) {
	tok, err := FromGGUF(bpeFile(b, "llama-bpe"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(benchText, 8)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text, true, false)
	}
}

// BenchmarkStreamAdd is the per-token detokenising cost.
func BenchmarkStreamAdd(b *testing.B) {
	tok, err := FromGGUF(bpeFile(b, "llama-bpe"))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(benchText+"日本語 😀", false, false)
	s := tok.NewStream()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(ids[i%len(ids)])
		i++
	}
}
