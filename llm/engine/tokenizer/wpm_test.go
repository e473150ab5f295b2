package tokenizer

import (
	"path/filepath"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// TestWPMSpecials checks what the reference vectors do not: addSpecial
// wraps the words in [CLS] … [SEP], a word no pieces cover is [UNK], and
// accents and case fold away before lookup.
func TestWPMSpecials(t *testing.T) {
	f, err := gguf.Open(filepath.Join(llamacppDir, "ggml-vocab-bert-bge.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	hello := tok.Encode("hello", false, false)
	if len(hello) != 1 || tok.Text(hello[0]) != "▁hello" {
		t.Fatalf("hello = %v", hello)
	}
	got := tok.Encode("Héllo", true, false)
	want := []int32{101, hello[0], 102}
	if !equalIDs(got, want) {
		t.Errorf("Encode(Héllo, addSpecial) = %v, want %v", got, want)
	}
	if got := tok.Encode("\U0001F999", false, false); !equalIDs(got, []int32{100}) {
		t.Errorf("an uncovered word = %v, want [UNK] 100", got)
	}
	if got := tok.Decode(hello); got != " hello" {
		t.Errorf("Decode = %q", got)
	}
}
