package tokenizer

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestPreTokenizerGolden compares the hand-written splitters with the real
// regexes (testdata/pretokenize.json, made by testdata/pretokenize_golden.py
// with python's regex module, which supports lookahead).
func TestPreTokenizerGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/pretokenize.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Pre   string   `json:"pre"`
		Text  string   `json:"text"`
		Words []string `json:"words"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	failures := 0
	for _, c := range cases {
		p, _, _, err := preTokenizerFor(c.Pre)
		if err != nil {
			t.Fatal(err)
		}
		got := p.split(c.Text)
		if len(got) == 0 && len(c.Words) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.Words) {
			failures++
			if failures <= 15 {
				t.Errorf("%s %q:\n got  %q\n want %q", c.Pre, c.Text, got, c.Words)
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d cases differ", failures, len(cases))
	}
}

// TestPreTokenizerRules pins one behaviour per regex alternative.
func TestPreTokenizerRules(t *testing.T) {
	cases := []struct {
		pre, text string
		want      []string
	}{
		{"gpt2", "a  b", []string{"a", " ", " b"}},                 // \s+(?!\S) leaves one space for the word
		{"gpt2", "a \tb", []string{"a", " ", "\t", "b"}},           // lone \t before a letter: plain \s+
		{"gpt2", "it's I'M", []string{"it", "'s", " I", "'", "M"}}, // contractions are lower-case only
		{"gpt2", "x 123", []string{"x", " 123"}},                   // ?\p{N}+
		{"gpt2", "hi!! ok", []string{"hi", "!!", " ok"}},           // ?[^\s\p{L}\p{N}]+
		{"gpt2", "end  ", []string{"end", "  "}},                   // trailing run kept whole
		{"llama-bpe", "I'M", []string{"I", "'M"}},                  // case-insensitive contractions
		{"llama-bpe", "12345", []string{"123", "45"}},              // \p{N}{1,3}
		{"llama-bpe", "(hello", []string{"(hello"}},                // [^\r\n\p{L}\p{N}]?\p{L}+
		{"llama-bpe", "a\n\n b", []string{"a", "\n\n", " b"}},      // \s*[\r\n]+
		{"llama-bpe", "a \n  b", []string{"a", " \n", " ", " b"}},  // newline run ends at the last newline
		{"llama-bpe", "x?!\n\ny", []string{"x", "?!\n\n", "y"}},    // punctuation takes trailing newlines
		{"llama-bpe", " 42", []string{" ", "42"}},                  // no space prefix for numbers
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},      // \p{N}
		{"smollm", "ab12 c", []string{"ab", "1", "2", " c"}},       // digits first, then gpt2
		{"default", "1234567", []string{"123", "456", "7"}},        // [0-9][0-9][0-9]
		{"default", "a+=b", []string{"a", "+=", "b"}},              // punctuation runs split first
	}
	for _, c := range cases {
		p, _, _, err := preTokenizerFor(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.split(c.text); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.text, got, c.want)
		}
	}
	if _, _, _, err := preTokenizerFor("no-such-pre"); err == nil {
		t.Error("unknown pre-tokenizer accepted")
	}
}
