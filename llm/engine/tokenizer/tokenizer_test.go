package tokenizer

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// sharedLLMDir is the shared LLM fixtures folder (skips the test when absent).
func sharedLLMDir(t testing.TB) string { t.Helper(); return testenv.SharedLLM(t) }

type refJSON struct {
	PromptIDs        []int32  `json:"prompt_ids"`
	GreedyIDs        []int32  `json:"greedy_ids"`
	GreedyText       *string  `json:"greedy_text"`
	GreedyTextHex    string   `json:"greedy_text_bytes_hex"`
	TextPrompt       string   `json:"text_prompt"`
	TextPromptIDs    []int32  `json:"text_prompt_ids"`
	TextPromptPieces []string `json:"text_prompt_pieces"`
	TextGreedyIDs    []int32  `json:"text_greedy_ids"`
	TextGreedyText   *string  `json:"text_greedy_text"`
}

func loadFixture(t *testing.T, name string) (*Tokenizer, refJSON) {
	t.Helper()
	dir := sharedLLMDir(t)
	path := filepath.Join(dir, name+".gguf")
	f, err := gguf.Open(path)
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
			t.Skipf("fixture missing: %s", path)
		}
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	var ref refJSON
	raw, err := os.ReadFile(filepath.Join(dir, name+".ref.json"))
	if err != nil {
		t.Skipf("reference missing: %v", err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return tok, ref
}

var fixtures = []string{"stories260K-f32", "stories260K-q8_0", "llama-gqa-tiny-f32", "llama-gqa-tiny-q8_0", "qwen2-tiny-f32", "qwen2-tiny-q8_0", "qwen3-tiny-f32", "qwen3-tiny-q8_0"}

func TestFixtureTokenization(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			tok, ref := loadFixture(t, name)
			if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 || !tok.AddBOS() || !tok.IsEOG(2) || tok.IsEOG(1) {
				t.Fatalf("vocab %d bos %d eos %d addBOS %v", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.AddBOS())
			}
			// The fixed 16-token prompt is BOS + this sentence in tok512.
			if got := tok.Encode("Once upon a time, there was a little girl named Lily.", true, false); !reflect.DeepEqual(got, ref.PromptIDs) {
				t.Errorf("prompt ids %v, want %v", got, ref.PromptIDs)
			}
			var want string
			if ref.GreedyText != nil {
				want = *ref.GreedyText
			} else {
				b, err := hex.DecodeString(ref.GreedyTextHex)
				if err != nil {
					t.Fatal(err)
				}
				want = string(b)
			}
			if got := tok.Decode(ref.GreedyIDs); got != want {
				t.Errorf("greedy text %q, want %q", got, want)
			}
			if ref.TextPrompt == "" {
				return
			}
			ids := tok.Encode(ref.TextPrompt, true, false)
			if !reflect.DeepEqual(ids, ref.TextPromptIDs) {
				t.Errorf("text prompt ids %v, want %v", ids, ref.TextPromptIDs)
			}
			for i, id := range ref.TextPromptIDs {
				if p := tok.Piece(id); p != ref.TextPromptPieces[i] {
					t.Errorf("piece %d (%d) = %q, want %q", i, id, p, ref.TextPromptPieces[i])
				}
			}
			if got := tok.Decode(ref.TextGreedyIDs); got != *ref.TextGreedyText {
				t.Errorf("text greedy %q, want %q", got, *ref.TextGreedyText)
			}
			// The stream drops the first token's space as llama.cpp's detokenizer does.
			s := tok.NewStream()
			var sb strings.Builder
			for _, id := range ref.TextGreedyIDs {
				sb.WriteString(s.Add(id))
			}
			sb.WriteString(s.Flush())
			if got := sb.String(); got != strings.TrimPrefix(*ref.TextGreedyText, " ") {
				t.Errorf("stream %q", got)
			}
		})
	}
}

func TestSPMRoundTripAndBytes(t *testing.T) {
	tok, _ := loadFixture(t, "stories260K-f32")
	// Characters outside the 512-token vocabulary fall back to <0xXX> tokens.
	ids := tok.Encode("日\n", false, false)
	if got := tok.Decode(ids); got != " 日\n" {
		t.Errorf("byte fallback: %v → %q", ids, got)
	}
	for _, id := range ids[1:] {
		if id < 3 || id > 258 {
			t.Errorf("expected byte tokens, got %v", ids)
		}
	}
	// Special tokens are text unless parseSpecial.
	if ids := tok.Encode("<s>", false, false); len(ids) < 2 {
		t.Errorf("<s> without parseSpecial: %v", ids)
	}
	if ids := tok.Encode("<s>hi", false, true); ids[0] != 1 {
		t.Errorf("<s> with parseSpecial: %v", ids)
	}
	if ids := tok.Encode("", true, false); !reflect.DeepEqual(ids, []int32{1}) {
		t.Errorf("empty: %v", ids)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		text := randomText(rng)
		got := tok.Decode(tok.Encode(text, false, false))
		if got != " "+text {
			t.Fatalf("round trip %q → %q", text, got)
		}
	}
}

var textPool = []string{"a", "b", "the", " ", " ", "  ", "\t", "\n", "é", "日本", "한", "😀", "Ω", "1", "23", "456", ".", ",", "!", "'s", "'LL", "$", "<", "|", "\u00a0", "\u0301", "Hello", "world", "don't"}

func randomText(rng *rand.Rand) string {
	var sb strings.Builder
	for n := rng.IntN(20); n >= 0; n-- {
		if rng.IntN(10) == 0 {
			sb.WriteRune(rune(0x20 + rng.IntN(0x2FFFF)))
			continue
		}
		sb.WriteString(textPool[rng.IntN(len(textPool))])
	}
	s := strings.ToValidUTF8(sb.String(), "?")
	return s
}

// bpeFile builds a small gpt2-style vocabulary: the 256 byte characters,
// merges learned from a corpus, and ChatML control tokens.
func bpeFile(t testing.TB, pre string) *gguf.File {
	t.Helper()
	vocab := make([]string, 0, 600)
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			vocab = append(vocab, s)
		}
	}
	for b := 0; b < 256; b++ {
		add(byteToUnicode[b])
	}
	corpus := "Hello world! The quick brown fox jumps over the lazy dog. It's 2024, and I'll say hello again: hello, hello world. Numbers 12345 and 678."
	p, _, _, err := preTokenizerFor(pre)
	if err != nil {
		t.Fatal(err)
	}
	var words [][]string
	for _, w := range p.split(corpus) {
		var syms []string
		for _, r := range encodeByteLevel(w) {
			syms = append(syms, string(r))
		}
		words = append(words, syms)
	}
	var merges []string
	for len(merges) < 120 {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 1; i < len(w); i++ {
				counts[[2]string{w[i-1], w[i]}]++
			}
		}
		if len(counts) == 0 {
			break
		}
		pairs := make([][2]string, 0, len(counts))
		for pr := range counts {
			pairs = append(pairs, pr)
		}
		sort.Slice(pairs, func(i, j int) bool {
			if counts[pairs[i]] != counts[pairs[j]] {
				return counts[pairs[i]] > counts[pairs[j]]
			}
			return pairs[i][0]+" "+pairs[i][1] < pairs[j][0]+" "+pairs[j][1]
		})
		best := pairs[0]
		merges = append(merges, best[0]+" "+best[1])
		add(best[0] + best[1])
		for wi, w := range words {
			var out []string
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best[0] && w[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, w[i])
				}
			}
			words[wi] = out
		}
	}
	types := make([]int32, len(vocab))
	for i := range types {
		types[i] = typeNormal
	}
	for _, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		vocab = append(vocab, s)
		types = append(types, typeControl)
	}
	w := gguf.NewWriter()
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", pre)
	w.Set("tokenizer.ggml.tokens", vocab)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", merges)
	w.Set("tokenizer.ggml.bos_token_id", uint32(len(vocab)-3))
	w.Set("tokenizer.ggml.eos_token_id", uint32(len(vocab)-1))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBPE(t *testing.T) {
	for _, pre := range []string{"default", "gpt2", "llama-bpe", "qwen2", "smollm"} {
		t.Run(pre, func(t *testing.T) {
			tok, err := FromGGUF(bpeFile(t, pre))
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode("hello world", false, false)
			if len(ids) != 2 || tok.Piece(ids[0]) != "hello" || tok.Piece(ids[1]) != " world" {
				t.Errorf("hello world → %v %q %q", ids, tok.Piece(ids[0]), tok.Decode(ids))
			}
			imEnd, _ := tok.ID("<|im_end|>")
			if !tok.IsEOG(imEnd) || !tok.IsEOG(tok.EOS()) {
				t.Error("<|im_end|> is not end of generation")
			}
			endOfText, _ := tok.ID("<|endoftext|>")
			if !tok.IsEOG(endOfText) {
				t.Error("<|endoftext|> is not end of generation")
			}
			withSpecial := tok.Encode("<|im_start|>user\nhi<|im_end|>", false, true)
			start, _ := tok.ID("<|im_start|>")
			if withSpecial[0] != start || withSpecial[len(withSpecial)-1] != imEnd {
				t.Errorf("parseSpecial: %v", withSpecial)
			}
			plain := tok.Encode("<|im_end|>", false, false)
			if len(plain) < 2 || tok.Decode(plain) != "<|im_end|>" {
				t.Errorf("without parseSpecial: %v", plain)
			}
			if tok.Piece(imEnd) != "" {
				t.Errorf("control piece %q", tok.Piece(imEnd))
			}
			if got := tok.AddBOS(); got != (pre == "llama-bpe") {
				t.Errorf("AddBOS %v", got)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 300; i++ {
				text := randomText(rng)
				if got := tok.Decode(tok.Encode(text, false, false)); got != text {
					t.Fatalf("round trip %q → %q", text, got)
				}
			}
		})
	}
}

// TestBPEMergeOrder checks the rank order and llama-bpe's whole-word shortcut.
func TestBPEMergeOrder(t *testing.T) {
	w := gguf.NewWriter()
	vocab := []string{"a", "b", "c", "ab", "bc", "abc"}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", "gpt2")
	w.Set("tokenizer.ggml.tokens", vocab)
	w.Set("tokenizer.ggml.merges", []string{"b c", "a b"}) // "abc" is not reachable from these
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, _ := gguf.Parse(buf.Bytes())
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("abc", false, false); !reflect.DeepEqual(got, []int32{0, 4}) {
		t.Errorf("gpt2 abc → %v, want [a bc]", got)
	}
	w.Set("tokenizer.ggml.pre", "llama-bpe")
	buf.Reset()
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, _ = gguf.Parse(buf.Bytes())
	tok, _ = FromGGUF(f)
	if got := tok.Encode("abc", false, false); !reflect.DeepEqual(got, []int32{5}) {
		t.Errorf("llama-bpe abc → %v, want [abc] (ignore_merges)", got)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	for name, set := range map[string]func(w *gguf.Writer){
		"no vocab": func(w *gguf.Writer) { w.Set("tokenizer.ggml.model", "llama") },
		"bad model": func(w *gguf.Writer) {
			w.Set("tokenizer.ggml.tokens", []string{"a"})
			w.Set("tokenizer.ggml.model", "wpm")
		},
		"bad pre": func(w *gguf.Writer) {
			w.Set("tokenizer.ggml.tokens", []string{"a"})
			w.Set("tokenizer.ggml.model", "gpt2")
			w.Set("tokenizer.ggml.pre", "martian")
		},
		"short scores": func(w *gguf.Writer) {
			w.Set("tokenizer.ggml.tokens", []string{"a", "b"})
			w.Set("tokenizer.ggml.model", "llama")
			w.Set("tokenizer.ggml.scores", []float32{1})
		},
		"bad eos": func(w *gguf.Writer) {
			w.Set("tokenizer.ggml.tokens", []string{"a", "b"})
			w.Set("tokenizer.ggml.model", "llama")
			w.Set("tokenizer.ggml.eos_token_id", uint32(9))
		},
	} {
		w := gguf.NewWriter()
		set(w)
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, _ := gguf.Parse(buf.Bytes())
		if _, err := FromGGUF(f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// streamAll feeds ids to a stream, flushing at the end.
func streamAll(tok *Tokenizer, ids []int32) string {
	s := tok.NewStream()
	var sb strings.Builder
	for _, id := range ids {
		out := s.Add(id)
		if !utf8.ValidString(out) {
			panic("stream emitted invalid UTF-8")
		}
		sb.WriteString(out)
	}
	sb.WriteString(s.Flush())
	return sb.String()
}

func TestTextStreamMultiTokenCharacters(t *testing.T) {
	tok, err := FromGGUF(bpeFile(t, "gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	// "日" is three byte tokens: nothing comes out until the third.
	ids := tok.Encode("日x", false, false)
	s := tok.NewStream()
	var outs []string
	for _, id := range ids {
		outs = append(outs, s.Add(id))
	}
	if !reflect.DeepEqual(outs, []string{"", "", "日", "x"}) {
		t.Errorf("outputs %q for %v", outs, ids)
	}
	// A character cut off at the end flushes as U+FFFD.
	s = tok.NewStream()
	s.Add(ids[0])
	if got := s.Flush(); got != "\uFFFD" {
		t.Errorf("flush %q", got)
	}
}

// FuzzTextStream checks that where tokens split characters does not change
// the stream's text: merged tokens and one-token-per-byte give the same
// output, equal to the whole text with each invalid byte as U+FFFD.
func FuzzTextStream(f *testing.F) {
	tok, err := FromGGUF(bpeFile(f, "llama-bpe"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("héllo 日本 😀"))
	f.Add([]byte{0xe6, 0x97, 0xa5, 0xff, 0x41})
	f.Add([]byte("hello world\n\nit's 123"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		perByte := make([]int32, len(raw))
		for i, b := range raw {
			id, ok := tok.ID(byteToUnicode[b])
			if !ok {
				t.Fatalf("byte %x has no token", b)
			}
			perByte[i] = id
		}
		if got, want := streamAll(tok, perByte), repairPerByte(string(raw)); got != want {
			t.Fatalf("per-byte stream %q, want %q", got, want)
		}
		valid := strings.ToValidUTF8(string(raw), "")
		merged := tok.Encode(valid, false, false)
		if got := streamAll(tok, merged); got != valid {
			t.Fatalf("merged stream %q, want %q", got, valid)
		}
	})
}

// repairPerByte replaces every byte outside a valid character with U+FFFD.
func repairPerByte(b string) string {
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRuneInString(b[i:])
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		sb.WriteString(b[i : i+n])
		i += n
	}
	return sb.String()
}
