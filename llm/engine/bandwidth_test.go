package engine

import (
	"context"
	"testing"
	"unsafe"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

func TestBenchBandwidth(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	checkBandwidth(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.BenchBandwidth(ctx, 3); err == nil {
		t.Fatal("a cancelled bench reported no error")
	}
	// Biases (qwen2), q/k norms (qwen3), Q4_0, and an output projection
	// cut into several chunks.
	q2 := defaultTiny("qwen2", gguf.TypeQ4_0)
	q2.vocab = 1000
	checkBandwidth(t, openTiny(t, q2, nil))
	checkBandwidth(t, openTiny(t, defaultTiny("qwen3", gguf.TypeQ8_0), nil))
}

// checkBandwidth runs the probe on e and checks what it read: every
// weight byte of a decode step once, in chunks that are the matrices'
// row ranges.
func checkBandwidth(t *testing.T, e *Engine) {
	t.Helper()
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
	// The probe reads every byte a step reads, once: all of DecodeBytes but
	// the one embedding row of an untied model.
	read := want
	if m.output != m.tokEmbd {
		read -= embd / int64(m.tokEmbd.rows)
	}
	if bw.BytesPerSecond <= 0 || bw.Threads != 2 || bw.DecodeBytes != want || bw.ReadBytes != read || bw.Passes != 3 {
		t.Fatalf("bandwidth %+v, want %d bytes read per pass", bw, read)
	}
	// Each weight's bytes are read once, in order: the chunks of a weight
	// follow each other in memory.
	seen := map[*weight]int{}
	owner := func(b []byte) *weight {
		p := uintptr(unsafe.Pointer(&b[0]))
		for _, w := range m.weights() {
			if len(w.raw) > 0 && p >= uintptr(unsafe.Pointer(&w.raw[0])) && p < uintptr(unsafe.Pointer(&w.raw[0]))+uintptr(len(w.raw)) {
				return w
			}
		}
		return nil
	}
	for i, c := range e.rt.reads {
		for _, b := range [][]byte{c.a, c.b} {
			if len(b) == 0 {
				continue
			}
			w := owner(b)
			if w == nil {
				t.Fatalf("chunk %d reads outside the weights", i)
			}
			if off := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&w.raw[0]))); off != seen[w] {
				t.Fatalf("chunk %d reads %s from byte %d, want %d", i, w.name, off, seen[w])
			}
			seen[w] += len(b)
		}
	}
	for _, w := range m.weights() {
		if w == m.tokEmbd && m.output != m.tokEmbd {
			continue
		}
		if seen[w] != len(w.raw) {
			t.Errorf("%s: probe read %d of %d bytes", w.name, seen[w], len(w.raw))
		}
	}
}
