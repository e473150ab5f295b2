package gguf

import (
	"bytes"
	"errors"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sharedLLMDir is the shared LLM fixtures folder (skips the test when absent).
func sharedLLMDir(t testing.TB) string { t.Helper(); return testenv.SharedLLM(t) }

func sampleWriter() *Writer {
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("general.name", "tiny")
	w.Set("u8", uint8(7))
	w.Set("i8", int8(-7))
	w.Set("u16", uint16(65000))
	w.Set("i16", int16(-300))
	w.Set("u32", uint32(1<<31))
	w.Set("i32", int32(-1<<30))
	w.Set("u64", uint64(1<<60))
	w.Set("i64", int64(-1<<60))
	w.Set("f32", float32(1.5))
	w.Set("f64", math.Pi)
	w.Set("yes", true)
	w.Set("no", false)
	w.Set("tokens", []string{"<unk>", "<s>", "</s>", "▁a"})
	w.Set("scores", []float32{0, 0, 0, -1.25})
	w.Set("types", []int32{2, 3, 3, 1})
	w.Set("flags", []bool{true, false})
	w.Set("nested", []any{[]any{uint32(1), uint32(2)}, []any{uint32(3)}})
	w.Set("empty", []string{})
	f32 := make([]byte, 4*8*3)
	for i := range f32 {
		f32[i] = byte(i)
	}
	w.AddTensor("a.weight", TypeF32, []uint64{8, 3}, f32)
	q8 := make([]byte, 34*2)
	for i := range q8 {
		q8[i] = byte(255 - i)
	}
	w.AddTensor("b.weight", TypeQ8_0, []uint64{64}, q8)
	w.AddTensor("c.weight", TypeF16, []uint64{3}, []byte{1, 2, 3, 4, 5, 6})
	return w
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	n, err := sampleWriter().WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Fatalf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	want := map[string]any{
		"general.architecture": "llama", "u8": uint8(7), "i8": int8(-7), "u16": uint16(65000),
		"i16": int16(-300), "u32": uint32(1 << 31), "i32": int32(-1 << 30), "u64": uint64(1 << 60),
		"i64": int64(-1 << 60), "f32": float32(1.5), "f64": math.Pi, "yes": true, "no": false,
		"tokens": []any{"<unk>", "<s>", "</s>", "▁a"},
		"flags":  []any{true, false},
		"nested": []any{[]any{uint32(1), uint32(2)}, []any{uint32(3)}},
		"empty":  []any{},
	}
	for k, v := range want {
		got, ok := f.Value(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if keys := f.Keys(); keys[0] != "general.architecture" || keys[len(keys)-1] != "empty" || len(keys) != 20 {
		t.Errorf("keys %v", keys)
	}
	if typ, elem, _ := f.ValueType("empty"); typ != ValueArray || elem != ValueString {
		t.Errorf("empty array type %s of %s", typ, elem)
	}
	if s, _ := f.Strings("tokens"); s[3] != "▁a" {
		t.Errorf("Strings %v", s)
	}
	if s, _ := f.Float32s("scores"); s[3] != -1.25 {
		t.Errorf("Float32s %v", s)
	}
	if s, _ := f.Int32s("types"); s[0] != 2 {
		t.Errorf("Int32s %v", s)
	}
	if u, ok := f.Uint("u16"); !ok || u != 65000 {
		t.Errorf("Uint u16 %d %v", u, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Error("Uint of a negative value succeeded")
	}
	if v, ok := f.Float("i32"); !ok || v != -1<<30 {
		t.Errorf("Float i32 %v", v)
	}
	ti, data, ok := f.Tensor("b.weight")
	if !ok || ti.Type != TypeQ8_0 || ti.Bytes() != 68 || data[0] != 255 || ti.Offset%32 != 0 {
		t.Errorf("tensor b %+v %v", ti, ok)
	}
	ti, data, _ = f.Tensor("c.weight")
	if !bytes.Equal(data, []byte{1, 2, 3, 4, 5, 6}) || ti.Elements() != 3 {
		t.Errorf("tensor c %+v %v", ti, data)
	}

	// Re-writing every value through CopyValue reproduces the file byte for byte.
	w := NewWriter()
	for _, k := range f.Keys() {
		w.CopyValue(f, k)
	}
	for _, ti := range f.Tensors {
		_, d, _ := f.Tensor(ti.Name)
		w.AddTensor(ti.Name, ti.Type, ti.Dims, d)
	}
	var again bytes.Buffer
	if _, err := w.WriteTo(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("copy of the file differs")
	}
}

func TestAlignment(t *testing.T) {
	w := sampleWriter()
	w.Set("general.alignment", uint32(64))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Fatalf("alignment %d offset %d", f.Alignment, f.DataOffset)
	}
	for _, ti := range f.Tensors {
		if ti.Offset%64 != 0 {
			t.Errorf("%s offset %d", ti.Name, ti.Offset)
		}
	}
	if len(buf.Bytes())%64 != 0 {
		t.Errorf("file length %d not padded", buf.Len())
	}
}

func TestVersion2(t *testing.T) {
	var buf bytes.Buffer
	if _, err := sampleWriter().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[4] = 2
	f, err := Parse(b)
	if err != nil || f.Version != 2 {
		t.Fatalf("v2: %v", err)
	}
}

func TestOpenMmap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := sampleWriter().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, d, ok := f.Tensor("a.weight"); !ok || d[5] != 5 {
		t.Error("tensor a")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, _, ok := f.Tensor("a.weight"); ok {
		t.Error("Tensor after Close")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriterErrors(t *testing.T) {
	cases := map[string]func(w *Writer){
		"bad value":     func(w *Writer) { w.Set("k", struct{}{}) },
		"mixed array":   func(w *Writer) { w.Set("k", []any{uint8(1), "x"}) },
		"bad alignment": func(w *Writer) { w.Set("general.alignment", uint32(3)) },
		"dup tensor": func(w *Writer) {
			w.AddTensor("t", TypeF32, []uint64{1}, make([]byte, 4))
			w.AddTensor("t", TypeF32, []uint64{1}, make([]byte, 4))
		},
		"short data":   func(w *Writer) { w.AddTensor("t", TypeF32, []uint64{2}, make([]byte, 4)) },
		"unknown type": func(w *Writer) { w.AddTensor("t", Type(99), []uint64{2}, nil) },
		"ragged block": func(w *Writer) { w.AddTensor("t", TypeQ8_0, []uint64{33}, make([]byte, 34)) },
	}
	for name, fn := range cases {
		w := NewWriter()
		fn(w)
		if _, err := w.WriteTo(&bytes.Buffer{}); !errors.Is(err, ErrWriter) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// header builds a raw file prefix for error tests.
func header(version uint32, nTensors, nKV uint64) []byte {
	e := &encoder{w: &countingWriter{w: &bytes.Buffer{}}}
	buf := e.w.w.(*bytes.Buffer)
	e.u32(magic)
	e.u32(version)
	e.u64(nTensors)
	e.u64(nKV)
	return buf.Bytes()
}

func appendKV(b []byte, key string, vt ValueType, val []byte) []byte {
	var buf bytes.Buffer
	e := &encoder{w: &countingWriter{w: &buf}}
	e.str(key)
	e.u32(uint32(vt))
	e.bytes(val)
	return append(b, buf.Bytes()...)
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
func le64(v uint64) []byte { return append(le32(uint32(v)), le32(uint32(v>>32))...) }

func appendTensor(b []byte, name string, dims []uint64, typ Type, off uint64) []byte {
	var buf bytes.Buffer
	e := &encoder{w: &countingWriter{w: &buf}}
	e.str(name)
	e.u32(uint32(len(dims)))
	for _, d := range dims {
		e.u64(d)
	}
	e.u32(uint32(typ))
	e.u64(off)
	return append(b, buf.Bytes()...)
}

func TestParseErrors(t *testing.T) {
	var valid bytes.Buffer
	if _, err := sampleWriter().WriteTo(&valid); err != nil {
		t.Fatal(err)
	}
	arr := func(elem ValueType, n uint64) []byte { return append(le32(uint32(elem)), le64(n)...) }
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadMagic},
		{"magic", []byte("GGML\x03\x00\x00\x00"), ErrBadMagic},
		{"v1", header(1, 0, 0), ErrVersion},
		{"v4", header(4, 0, 0), ErrVersion},
		{"big endian", header(3<<24, 0, 0), ErrVersion},
		{"header cut", header(3, 0, 0)[:12], ErrTruncated},
		{"absurd kv count", header(3, 0, 1<<62), ErrLimit},
		{"absurd tensor count", header(3, 1<<62, 0), ErrLimit},
		{"metadata cut", valid.Bytes()[:60], ErrTruncated},
		{"string too long", appendKV(header(3, 0, 1), "k", ValueString, le64(1<<40)), ErrTruncated},
		{"array too long", appendKV(header(3, 0, 1), "k", ValueArray, arr(ValueUint32, 1<<40)), ErrTruncated},
		{"bad value type", appendKV(header(3, 0, 1), "k", 13, nil), ErrValueType},
		{"bad array elem", appendKV(header(3, 0, 1), "k", ValueArray, arr(42, 0)), ErrValueType},
		{"deep nesting", appendKV(header(3, 0, 1), "k", ValueArray, bytes.Repeat(arr(ValueArray, 1), 20)), ErrLimit},
		{"dup key", appendKV(appendKV(header(3, 0, 2), "k", ValueUint8, []byte{1}), "k", ValueUint8, []byte{1}), ErrDuplicate},
		{"bad alignment", appendKV(header(3, 0, 1), "general.alignment", ValueUint32, le32(48)), ErrMisaligned},
		{"unknown tensor type", appendTensor(header(3, 1, 0), "w", []uint64{4}, 77, 0), ErrUnknownType},
		{"too many dims", appendTensor(header(3, 1, 0), "w", []uint64{1, 1, 1, 1, 1}, TypeF32, 0), ErrShape},
		{"ragged q8", appendTensor(header(3, 1, 0), "w", []uint64{31}, TypeQ8_0, 0), ErrShape},
		{"overflow dims", appendTensor(header(3, 1, 0), "w", []uint64{1 << 40, 1 << 40}, TypeF32, 0), ErrShape},
		{"misaligned", appendTensor(header(3, 1, 0), "w", []uint64{1}, TypeF32, 4), ErrMisaligned},
		{"dup tensor", appendTensor(appendTensor(header(3, 2, 0), "w", []uint64{1}, TypeF32, 0), "w", []uint64{1}, TypeF32, 32), ErrDuplicate},
		{"data past eof", appendTensor(header(3, 1, 0), "w", []uint64{1024}, TypeF32, 0), ErrTruncated},
		{"data cut", valid.Bytes()[:valid.Len()-40], ErrTruncated},
		{"tensor info cut", appendTensor(header(3, 1, 0), "w", []uint64{1024}, TypeF32, 0)[:40], ErrTruncated},
	}
	for _, c := range cases {
		_, err := Parse(c.data)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	_, err := Parse(appendTensor(header(3, 1, 0), "blk.0.w", []uint64{4}, 77, 0))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"blk.0.w"`)) {
		t.Errorf("unknown type error does not name the tensor: %v", err)
	}
}

// fixtureTensors lists a few tensors per fixture from the README. (The README
// says 26 tensors for qwen3-tiny, but its own list adds up to 2+2×11 = 24.)
var fixtureTensors = map[string]struct {
	count   int
	arch    string
	tensors map[string][]uint64
	q8      bool
}{
	"stories260K-f32.gguf":     {48, "llama", map[string][]uint64{"token_embd.weight": {64, 512}, "output.weight": {64, 512}, "blk.4.ffn_down.weight": {172, 64}, "blk.0.attn_k.weight": {64, 32}}, false},
	"stories260K-q8_0.gguf":    {48, "llama", map[string][]uint64{"token_embd.weight": {64, 512}, "blk.4.ffn_down.weight": {172, 64}, "blk.0.attn_k.weight": {64, 32}}, true},
	"llama-gqa-tiny-f32.gguf":  {21, "llama", map[string][]uint64{"output.weight": {64, 512}, "blk.1.ffn_gate.weight": {64, 192}, "blk.1.ffn_down.weight": {192, 64}}, false},
	"llama-gqa-tiny-q8_0.gguf": {21, "llama", map[string][]uint64{"output.weight": {64, 512}, "blk.1.ffn_gate.weight": {64, 192}}, true},
	"qwen2-tiny-f32.gguf":      {26, "qwen2", map[string][]uint64{"blk.0.attn_q.bias": {64}, "blk.1.attn_k.bias": {32}}, false},
	"qwen2-tiny-q8_0.gguf":     {26, "qwen2", map[string][]uint64{"blk.0.attn_q.bias": {64}, "blk.0.attn_v.weight": {64, 32}}, true},
	"qwen3-tiny-f32.gguf":      {24, "qwen3", map[string][]uint64{"blk.0.attn_q.weight": {64, 128}, "blk.1.attn_q_norm.weight": {32}, "blk.0.attn_output.weight": {128, 64}}, false},
	"qwen3-tiny-q8_0.gguf":     {24, "qwen3", map[string][]uint64{"blk.0.attn_q.weight": {64, 128}, "blk.1.attn_k_norm.weight": {32}}, true},
}

func TestFixtures(t *testing.T) {
	dir := sharedLLMDir(t)
	for name, want := range fixtureTensors {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("fixture missing: %s", path)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != want.count {
				t.Errorf("%d tensors, want %d", len(f.Tensors), want.count)
			}
			if a, _ := f.String("general.architecture"); a != want.arch {
				t.Errorf("arch %q", a)
			}
			if toks, _ := f.Strings("tokenizer.ggml.tokens"); len(toks) != 512 {
				t.Errorf("%d tokens", len(toks))
			}
			if m, _ := f.String("tokenizer.ggml.model"); m != "llama" {
				t.Errorf("tokenizer model %q", m)
			}
			for tn, dims := range want.tensors {
				ti, data, ok := f.Tensor(tn)
				if !ok {
					t.Errorf("tensor %s missing", tn)
					continue
				}
				if !reflect.DeepEqual(ti.Dims, dims) {
					t.Errorf("%s dims %v, want %v", tn, ti.Dims, dims)
				}
				wantType := TypeF32
				if want.q8 && len(dims) == 2 && tn != "blk.4.ffn_down.weight" {
					wantType = TypeQ8_0
				}
				if ti.Type != wantType {
					t.Errorf("%s type %s, want %s", tn, ti.Type, wantType)
				}
				if uint64(len(data)) != ti.Bytes() {
					t.Errorf("%s data %d bytes", tn, len(data))
				}
			}
			if want.q8 {
				if ft, _ := f.Uint("general.file_type"); ft != 7 {
					t.Errorf("file_type %d", ft)
				}
			}
			// Copying the file with the Writer gives a file that parses to the same contents.
			w := NewWriter()
			for _, k := range f.Keys() {
				w.CopyValue(f, k)
			}
			for _, ti := range f.Tensors {
				_, d, _ := f.Tensor(ti.Name)
				w.AddTensor(ti.Name, ti.Type, ti.Dims, d)
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			g, err := Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range f.Keys() {
				a, _ := f.Value(k)
				b, _ := g.Value(k)
				if !reflect.DeepEqual(a, b) && !isNaN(a) {
					t.Errorf("key %s differs after copy", k)
				}
			}
			for _, ti := range f.Tensors {
				_, a, _ := f.Tensor(ti.Name)
				_, b, _ := g.Tensor(ti.Name)
				if !bytes.Equal(a, b) {
					t.Errorf("tensor %s differs after copy", ti.Name)
				}
			}
		})
	}
}

func isNaN(v any) bool {
	f, ok := v.(float32)
	return ok && f != f
}

func TestAddTensorFunc(t *testing.T) {
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.AddTensorFunc("streamed", TypeF32, []uint64{4, 2}, func(out io.Writer) error {
		for row := 0; row < 2; row++ {
			if _, err := out.Write(bytes.Repeat([]byte{byte(row + 1)}, 16)); err != nil {
				return err
			}
		}
		return nil
	})
	w.AddTensor("after", TypeF16, []uint64{2}, []byte{9, 9, 9, 9})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, d, _ := f.Tensor("streamed")
	if d[0] != 1 || d[31] != 2 {
		t.Errorf("streamed data %v", d)
	}
	if _, d, _ := f.Tensor("after"); d[0] != 9 {
		t.Errorf("after data %v", d)
	}
	short := NewWriter()
	short.AddTensorFunc("short", TypeF32, []uint64{4}, func(out io.Writer) error { _, err := out.Write(make([]byte, 8)); return err })
	if _, err := short.WriteTo(io.Discard); !errors.Is(err, ErrWriter) {
		t.Errorf("short emit: %v", err)
	}
}
