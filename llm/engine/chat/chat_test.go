package chat

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var conversation = []llm.Message{
	{Role: llm.RoleSystem, Content: "You are a helpful voice assistant."},
	{Role: llm.RoleUser, Content: "What's the weather like?"},
	{Role: llm.RoleAssistant, Content: " I can't check the weather, sorry. "},
	{Role: llm.RoleUser, Content: "Tell me a joke.\n"},
}

func TestDetect(t *testing.T) {
	cases := map[string]string{
		"": Raw,
		"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}":                                 ChatML,
		"{% set loop_messages = messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}":             Llama3,
		"{% if messages[0]['role'] == 'system' %}{{ bos_token + '[INST] ' + '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% endif %}{{ content + ' [/INST]' }}": Llama2,
		"chatml": ChatML,
		"llama3": Llama3,
		"gemma":  Gemma,
		// Excerpts of the families' templates (testdata/reference/README.md).
		"{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}":                                              Qwen25,
		"{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}":                                               SmolLM2,
		"{{- \"## Metadata\\n\\n\" -}} {{- \"Reasoning Mode: \" + reasoning_mode }} You are a helpful AI assistant named SmolLM, trained by Hugging Face <|im_start|>": SmolLM3,
		"{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}":                                               Llama31,
		"{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}":                                                                         Gemma,
		"{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}":                                                                      Phi3,
	}
	for tmpl, want := range cases {
		got, known := Identify(tmpl)
		if got != want || !known {
			t.Errorf("Identify(%.50q) = %s %v, want %s true", tmpl, got, known, want)
		}
		if d := Detect(tmpl); d != got {
			t.Errorf("Detect(%.50q) = %s, Identify %s", tmpl, d, got)
		}
	}
	// An unrecognised template renders in Default, and says so.
	for _, tmpl := range []string{"{{ messages }} some other template", "{% for m in messages %}<|system|>{{ m.content }}<|end|>{% endfor %}"} {
		if got, known := Identify(tmpl); got != Default || known {
			t.Errorf("Identify(%.50q) = %s %v, want %s false", tmpl, got, known, Default)
		}
	}
}

// TestDetectVocabTemplate: the chat template a real GGUF carries (llama.cpp's
// Phi-3 vocabulary, in the tokenizer's test data) is recognised.
func TestDetectVocabTemplate(t *testing.T) {
	path := filepath.Join("..", "tokenizer", "testdata", "llamacpp", "ggml-vocab-phi-3.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Skipf("the Phi-3 vocabulary is absent: %v", err)
	}
	defer f.Close()
	tmpl, ok := f.String("tokenizer.chat_template")
	if !ok {
		t.Fatal("ggml-vocab-phi-3.gguf has no tokenizer.chat_template")
	}
	if got, known := Identify(tmpl); got != Phi3 || !known {
		t.Errorf("Identify(phi-3's template) = %s %v, want phi3", got, known)
	}
}

func TestGolden(t *testing.T) {
	for _, name := range Names {
		for _, gen := range []bool{false, true} {
			got, err := Render(name, conversation, gen)
			if err != nil {
				t.Fatal(err)
			}
			file := name
			if gen {
				file += "_gen"
			}
			path := filepath.Join("testdata", file+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s gen=%v:\n got %q\nwant %q", name, gen, got, want)
			}
		}
	}
}

// TestPrefixStable: every prefix of a conversation renders to a prefix of
// the whole, with the generation prompt when the next message is the
// assistant's, so the engine can reuse its KV cache across turns.
func TestPrefixStable(t *testing.T) {
	convs := [][]llm.Message{
		conversation,
		conversation[1:],
		append(append([]llm.Message{}, conversation...), llm.Message{Role: llm.RoleAssistant, Content: "Why did the chicken cross the road?"}, llm.Message{Role: llm.RoleUser, Content: "Why?"}),
		{{Role: llm.RoleUser, Content: "a"}, {Role: llm.RoleUser, Content: "b"}, {Role: llm.RoleAssistant, Content: "c"}},
	}
	for _, name := range Names {
		for ci, conv := range convs {
			full, err := Render(name, conv, true)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < len(conv); k++ {
				gen := conv[k].Role == llm.RoleAssistant
				prefix, err := Render(name, conv[:k], gen)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(full, prefix) {
					t.Errorf("%s conv %d: rendering of the first %d messages (gen=%v) is not a prefix:\n%q\n%q", name, ci, k, gen, prefix, full)
				}
				noGen, _ := Render(name, conv[:k], false)
				if !strings.HasPrefix(full, noGen) {
					t.Errorf("%s conv %d: first %d messages without the generation prompt is not a prefix", name, ci, k)
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := Render("vicuna", conversation, true); !errors.Is(err, ErrUnknownTemplate) {
		t.Errorf("unknown template: %v", err)
	}
	if _, err := Render(Llama2, []llm.Message{{Role: "tool", Content: "x"}}, true); !errors.Is(err, ErrRole) {
		t.Errorf("llama2 tool role: %v", err)
	}
	if _, err := Render(ChatML, []llm.Message{{Content: "x"}}, true); !errors.Is(err, ErrRole) {
		t.Errorf("empty role: %v", err)
	}
	if s, err := Render(ChatML, []llm.Message{{Role: "observer", Content: "42"}}, false); err != nil || s != "<|im_start|>observer\n42<|im_end|>\n" {
		t.Errorf("chatml custom role %q %v", s, err)
	}
	// RoleTool is a tool result (tools.go), rendered as Qwen2.5 does.
	if s, err := Render(ChatML, []llm.Message{{Role: llm.RoleTool, Content: "42"}}, false); err != nil || s != "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n" {
		t.Errorf("chatml tool result %q %v", s, err)
	}
}

func TestStopStrings(t *testing.T) {
	if s := StopStrings(ChatML); len(s) == 0 || s[0] != "<|im_end|>" {
		t.Errorf("chatml %v", s)
	}
	if s := StopStrings(Llama3); s[0] != "<|eot_id|>" {
		t.Errorf("llama3 %v", s)
	}
	if s := StopStrings(Llama2); s[0] != "</s>" {
		t.Errorf("llama2 %v", s)
	}
	if s := StopStrings(Gemma); s[0] != "<end_of_turn>" {
		t.Errorf("gemma %v", s)
	}
	if s := StopStrings(Qwen25); s[0] != "<|im_end|>" {
		t.Errorf("qwen2.5 %v", s)
	}
	if s := StopStrings(Raw); s != nil {
		t.Errorf("raw %v", s)
	}
}

// TestConfigNames: llm.engine.chat_template accepts every template name.
func TestConfigNames(t *testing.T) {
	for _, n := range Names {
		if !slices.Contains(config.ChatTemplates, n) {
			t.Errorf("internal/config.ChatTemplates lacks %q", n)
		}
	}
	if len(config.ChatTemplates) != len(Names)+1 {
		t.Errorf("internal/config.ChatTemplates %v is not \"\" and Names %v", config.ChatTemplates, Names)
	}
}
