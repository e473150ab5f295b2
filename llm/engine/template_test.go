package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/chat"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// TestTemplateRecognised: the file's chat template picks the rendering; one
// the engine does not know falls back to chat.Default and says so in the
// loading message, never silently.
func TestTemplateRecognised(t *testing.T) {
	cases := []struct {
		template, config, want string
		warned                 bool
	}{
		{"", "", chat.Raw, false},
		{"{{ '<start_of_turn>' + role + '\n' }}", "", chat.Gemma, false},
		{"{{- \"Cutting Knowledge Date: December 2023\\n\" }}<|start_header_id|>", "", chat.Llama31, false},
		{"{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}", "", chat.Default, true},
		{"{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}", chat.Phi3, chat.Phi3, false},
	}
	for _, c := range cases {
		s := defaultTiny("llama", gguf.TypeF32)
		s.template = c.template
		e := openTiny(t, s, func(cfg *Config) { cfg.ChatTemplate = c.config })
		info := e.Info()
		if e.Template() != c.want || (info.TemplateWarning != "") != c.warned {
			t.Errorf("template %.40q (config %q): %s, warning %q; want %s, warned %v", c.template, c.config, e.Template(), info.TemplateWarning, c.want, c.warned)
		}
		if err := e.CanCallTools(); chat.ListsTools(c.want) != (err == nil) || (err != nil && !errors.Is(err, chat.ErrNoTools)) {
			t.Errorf("template %s: CanCallTools %v", c.want, err)
		}
		if c.warned && (!strings.Contains(info.String(), "unrecognised chat template") || !strings.Contains(info.TemplateWarning, "llm.engine.chat_template")) {
			t.Errorf("the fallback is not said: %q / %q", info.String(), info.TemplateWarning)
		}
		e.Close()
	}
}
