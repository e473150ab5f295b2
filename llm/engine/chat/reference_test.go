package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

// The reference renderings (testdata/reference/README.md): conversations
// in Hugging Face's message shape and what each family's own chat template
// renders for them through Jinja2.
type refConversations struct {
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Conversations map[string][]struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"conversations"`
}

type refRenderings struct {
	Sources map[string]string `json:"sources"`
	Cases   []struct {
		Family              string `json:"family"`
		Conversation        string `json:"conversation"`
		Tools               bool   `json:"tools"`
		AddGenerationPrompt bool   `json:"add_generation_prompt"`
		Text                string `json:"text"`
	} `json:"cases"`
}

// refTemplate is the template name that renders each reference family.
var refTemplate = map[string]string{
	"qwen2.5":  Qwen25,
	"llama3.1": Llama31,
	"llama3.2": Llama31,
	"phi3":     Phi3,
	"gemma3":   Gemma,
	"smollm2":  SmolLM2,
	"smollm3":  SmolLM3,
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestReferenceRenderings: every family renders every reference
// conversation exactly as its own template does, tools and calls included.
// The one intended difference: Phi-3's template ends a conversation
// rendered without the generation prompt with its EOS token, which
// RenderWith leaves out (the rendering must stay a prefix of the next turn's).
func TestReferenceRenderings(t *testing.T) {
	dir := filepath.Join("testdata", "reference")
	var convs refConversations
	var refs refRenderings
	readJSON(t, filepath.Join(dir, "conversations.json"), &convs)
	readJSON(t, filepath.Join(dir, "renderings.json"), &refs)
	var tools []llm.Tool
	for _, tl := range convs.Tools {
		tools = append(tools, llm.Tool{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	msgs := map[string][]llm.Message{}
	for name, conv := range convs.Conversations {
		for _, m := range conv {
			lm := llm.Message{Role: m.Role, Content: m.Content}
			for _, c := range m.ToolCalls {
				lm.ToolCalls = append(lm.ToolCalls, llm.ToolCall{Name: c.Function.Name, Arguments: string(c.Function.Arguments)})
			}
			msgs[name] = append(msgs[name], lm)
		}
	}
	seen := map[string]int{}
	for _, c := range refs.Cases {
		name, ok := refTemplate[c.Family]
		if !ok {
			t.Errorf("reference family %q has no template name", c.Family)
			continue
		}
		conv, ok := msgs[c.Conversation]
		if !ok {
			t.Fatalf("reference conversation %q is not in conversations.json", c.Conversation)
		}
		var o Options
		if c.Tools {
			o.Tools = tools
		}
		got, err := RenderWith(name, conv, o, c.AddGenerationPrompt)
		if err != nil {
			t.Errorf("%s %s gen=%v: %v", c.Family, c.Conversation, c.AddGenerationPrompt, err)
			continue
		}
		want := c.Text
		if name == Phi3 && !c.AddGenerationPrompt {
			want = strings.TrimSuffix(want, "<|endoftext|>")
		}
		if got != want {
			t.Errorf("%s (%s) %s gen=%v:\n got %q\nwant %q", c.Family, refs.Sources[c.Family], c.Conversation, c.AddGenerationPrompt, got, want)
		}
		seen[c.Family]++
	}
	for fam := range refTemplate {
		if seen[fam] == 0 {
			t.Errorf("no reference rendering of %s", fam)
		}
	}
}
