package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// patchDims rewrites the dims of tensor name in a GGUF file in place.
func patchDims(t *testing.T, path, name string, dims ...uint64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	key = append(key, name...)
	i := bytes.Index(data, key)
	if i < 0 {
		t.Fatalf("no tensor info for %s", name)
	}
	at := i + len(key) + 4 // n_dims
	for k, d := range dims {
		binary.LittleEndian.PutUint64(data[at+8*k:], d)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A crafted model fails to open with an error, never a panic.
func TestOpenCraftedShapes(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	for _, c := range []struct {
		name string
		dims []uint64
	}{
		// dim x 2^56 F32 = 2^64 bytes: wrapped to 0 and passed.
		{"token_embd.weight", []uint64{uint64(s.dim), 1 << 56}},
		{"output_norm.weight", []uint64{1 << 62}},
		{"blk.0.ffn_up.weight", []uint64{uint64(s.dim), 1 << 56}},
	} {
		path := writeTiny(t, s)
		patchDims(t, path, c.name, c.dims...)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s %v: Open panicked: %v", c.name, c.dims, p)
				}
			}()
			e, err := Open(Config{ModelPath: path, Threads: 1})
			if err == nil {
				e.Close()
				t.Errorf("%s %v: opened", c.name, c.dims)
			} else if !errors.Is(err, gguf.ErrShape) && !errors.Is(err, ErrBadShape) {
				t.Errorf("%s %v: %v, want a shape error", c.name, c.dims, err)
			}
		}()
	}
}
