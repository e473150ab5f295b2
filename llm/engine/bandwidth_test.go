package engine

import (
	"context"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

func TestBenchBandwidth(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	m := e.model
	var all, embd int64
	for _, w := range m.weights() {
		all += int64(len(w.raw))
	}
	embd = int64(len(m.tokEmbd.raw))
	want := all
	if m.output != m.tokEmbd {
		want = all - embd + embd/int64(m.tokEmbd.rows) // one embedding row per step
	}
	if got := e.DecodeBytes(); got != want || got <= 0 {
		t.Fatalf("DecodeBytes = %d, want %d", got, want)
	}
	bw, err := e.BenchBandwidth(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if bw.BytesPerSecond <= 0 || bw.Threads != 2 || bw.DecodeBytes != want {
		t.Fatalf("bandwidth %+v", bw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.BenchBandwidth(ctx, 3); err == nil {
		t.Fatal("a cancelled bench reported no error")
	}
}
