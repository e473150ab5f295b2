// Package chat renders conversations in the prompt formats chat models were
// trained on. It recognises a model's Jinja template (tokenizer.chat_template)
// by its markers instead of executing it.
//
// Rendering is prefix-stable: rendering a history followed by new messages
// starts with the rendering of the history alone (with or without the
// generation prompt, when the next message is the assistant's), so the engine
// can keep its KV cache across turns and only evaluate the new tokens. The
// output has no BOS; encode it with the tokenizer's addSpecial (BOS) and
// parseSpecial (control tokens such as <|im_start|>) set.
package chat

import (
	"fmt"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
)

// Template names.
const (
	ChatML = "chatml" // <|im_start|>role\n…<|im_end|> (Qwen, SmolLM, …)
	Llama3 = "llama3" // <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>
	Llama2 = "llama2" // [INST] <<SYS>>…<</SYS>> … [/INST] … </s>
	Raw    = "raw"    // contents joined with newlines, for base models
)

// Detect names the template a model's tokenizer.chat_template uses, by its
// markers; "" or an unrecognised template gives Raw. A template name itself
// (as a config may give) is returned unchanged.
func Detect(chatTemplate string) string {
	switch t := strings.TrimSpace(chatTemplate); {
	case t == ChatML || t == Llama3 || t == Llama2 || t == Raw:
		return t
	case strings.Contains(t, "<|im_start|>"):
		return ChatML
	case strings.Contains(t, "<|start_header_id|>"):
		return Llama3
	case strings.Contains(t, "[INST]"):
		return Llama2
	}
	return Raw
}

// Render formats msgs. addGenerationPrompt appends the header that makes the
// model answer as the assistant (nothing for Llama2 and Raw, whose prompt
// already ends where the answer starts).
func Render(name string, msgs []llm.Message, addGenerationPrompt bool) (string, error) {
	return RenderWith(name, msgs, Options{}, addGenerationPrompt)
}

// RenderWith is Render with tools (tools.go): o.Tools are listed in the
// template's tool convention, and assistant messages with ToolCalls and
// RoleTool results are rendered as the template's calls and results. Llama2
// and Raw have no such convention: tools there are an error, and so are
// tool calls and results (Raw joins their contents).
func RenderWith(name string, msgs []llm.Message, o Options, addGenerationPrompt bool) (string, error) {
	var sb strings.Builder
	for i, m := range msgs {
		if m.Role == "" {
			return "", fmt.Errorf("%w: message %d has no role", ErrRole, i)
		}
	}
	if len(o.Tools) > 0 && name != ChatML && name != Llama3 {
		return "", fmt.Errorf("%w: %q", ErrNoTools, name)
	}
	switch name {
	case ChatML:
		if err := renderChatML(&sb, msgs, o); err != nil {
			return "", err
		}
		if addGenerationPrompt {
			sb.WriteString("<|im_start|>assistant\n")
		}
	case Llama3:
		if err := renderLlama3(&sb, msgs, o); err != nil {
			return "", err
		}
		if addGenerationPrompt {
			sb.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case Llama2:
		if err := renderLlama2(&sb, msgs); err != nil {
			return "", err
		}
	case Raw:
		for i, m := range msgs {
			if i > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(m.Content)
		}
	default:
		return "", fmt.Errorf("%w: %q (want chatml, llama3, llama2 or raw)", ErrUnknownTemplate, name)
	}
	return sb.String(), nil
}

// renderLlama2 writes Meta's Llama 2 chat format. The system prompt opens
// the first [INST] block so that it is a prefix of the full prompt.
func renderLlama2(sb *strings.Builder, msgs []llm.Message) error {
	prev := ""
	for i, m := range msgs {
		content := strings.TrimSpace(m.Content)
		switch m.Role {
		case llm.RoleSystem:
			if prev == llm.RoleAssistant {
				sb.WriteString("<s>")
			}
			sb.WriteString("[INST] <<SYS>>\n" + content + "\n<</SYS>>\n\n")
		case llm.RoleUser:
			switch prev {
			case llm.RoleSystem:
				// inside the [INST] block the system prompt opened
			case llm.RoleAssistant:
				sb.WriteString("<s>[INST] ")
			default:
				sb.WriteString("[INST] ")
			}
			sb.WriteString(content + " [/INST]")
		case llm.RoleAssistant:
			sb.WriteString(" " + content + " </s>")
		default:
			return fmt.Errorf("%w: %q in message %d (llama2 knows system, user, assistant)", ErrRole, m.Role, i)
		}
		prev = m.Role
	}
	return nil
}

// StopStrings are texts that end the assistant's turn in the template, for
// when a model writes them as plain text rather than as control tokens.
func StopStrings(name string) []string {
	switch name {
	case ChatML:
		return []string{"<|im_end|>", "<|im_start|>"}
	case Llama3:
		return []string{"<|eot_id|>", "<|start_header_id|>", "<|end_of_text|>"}
	case Llama2:
		return []string{"</s>", "[INST]"}
	}
	return nil
}
