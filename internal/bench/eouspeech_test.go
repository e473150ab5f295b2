package bench

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The texts spoken: markers kept as words, bench turns' own utterances left
// out (the scorer is judged on them), empty and comment lines skipped.
func TestReadEOUSpeechTexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.tsv")
	in := "# comment\nuser\tif it rains, should i go | thanks\n\neveryday\twhat time is it\n" +
		"short\tstop\nuser\tso what is the capital of france then\nbare text without a source\n"
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	texts, err := readEOUSpeechTexts(path, 0, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range texts {
		got[strings.Join(x.words, " ")] = x.source
	}
	want := map[string]string{"if it rains , should i go | thanks": "user", "bare text without a source": ""}
	if len(got) != len(want) {
		t.Fatalf("texts %q, want %q", got, want)
	}
	for k, v := range want {
		if s, ok := got[k]; !ok || s != v {
			t.Errorf("%q: source %q (present %v), want %q", k, s, ok, v)
		}
	}
	if _, err := readEOUSpeechTexts(filepath.Join(t.TempDir(), "missing.tsv"), 0, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("a missing file gave no error")
	}
}
