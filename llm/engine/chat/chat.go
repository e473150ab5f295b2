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
	"unicode"

	"github.com/voxpipe/voxpipe/llm"
)

// Template names. The first four are the generic formats; the others are
// families whose templates add something to them (a default system prompt,
// a dated system header) or have their own markers.
const (
	ChatML = "chatml" // <|im_start|>role\n…<|im_end|> (Qwen, SmolLM, …)
	Llama3 = "llama3" // <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>
	Llama2 = "llama2" // [INST] <<SYS>>…<</SYS>> … [/INST] … </s>
	Raw    = "raw"    // contents joined with newlines, for base models

	// Qwen25 is ChatML with Qwen2.5-Instruct's default system prompt
	// ("You are Qwen, created by Alibaba Cloud. …") when the conversation has none.
	Qwen25 = "qwen2.5"
	// SmolLM2 is ChatML with SmolLM2-Instruct's default system prompt.
	SmolLM2 = "smollm2"
	// SmolLM3 is SmolLM3's ChatML: a metadata system block and, in its
	// "/no_think" reasoning mode (the default here: a voice assistant must
	// not speak its reasoning; "/think" in the system prompt turns it on),
	// an empty <think></think> opening every assistant turn. No tools.
	SmolLM3 = "smollm3"
	// Llama31 is Llama 3.1-3.3's format: Llama3 plus a system header that
	// is always there, with the knowledge cutoff and a date
	// (Options.Date), and "Environment: ipython" when tools are offered;
	// tool results are rendered as JSON strings, as Meta's template does.
	Llama31 = "llama3.1"
	// Gemma is Gemma 2/3's <start_of_turn>user|model\n…<end_of_turn>\n with
	// the system prompt at the head of the first user turn (Gemma 3's
	// template; Gemma 2's refuses a system message) and contents trimmed.
	Gemma = "gemma"
	// Phi3 is Phi-3/3.5's <|system|>, <|user|>, <|assistant|> turns, each
	// "\n…<|end|>\n".
	Phi3 = "phi3"
)

// Default is the template used for a chat_template that Identify does not
// recognise, as llama.cpp does: ChatML, the format most chat models are
// tuned on. The engine logs a warning when it falls back to it.
const Default = ChatML

// defaultDate is the date Llama31 writes when Options.Date is empty: the
// one Meta's Llama 3.1 template uses when it is given none.
const defaultDate = "26 Jul 2024"

// defaultSystem is the system prompt a family's template adds when the
// conversation has none.
var defaultSystem = map[string]string{
	Qwen25:  "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
	SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
}

// Names lists every template name Render knows.
var Names = []string{ChatML, Llama3, Llama2, Raw, Qwen25, SmolLM2, SmolLM3, Llama31, Gemma, Phi3}

// Family is the generic format a template name renders in (ChatML for
// Qwen25 and SmolLM2, Llama3 for Llama31, the name itself otherwise): the
// tool-call convention and the parsing of calls follow it.
func Family(name string) string {
	switch name {
	case Qwen25, SmolLM2:
		return ChatML
	case Llama31:
		return Llama3
	}
	return name
}

// ListsTools says whether the template has a tool-call convention: tools
// can be offered to a model rendered with it (RenderWith) and its calls read.
func ListsTools(name string) bool {
	f := Family(name)
	return f == ChatML || f == Llama3
}

// Detect names the template a model's tokenizer.chat_template uses (see
// Identify); an unrecognised template gives Default.
func Detect(chatTemplate string) string {
	name, _ := Identify(chatTemplate)
	return name
}

// Identify recognises a model's tokenizer.chat_template by its markers and
// returns the template name to render with. A template name itself (as a
// config may give) is returned unchanged; "" (a base model without a
// template) is Raw. known is false when the template is not recognised:
// name is then Default and the caller should say so.
func Identify(chatTemplate string) (name string, known bool) {
	t := strings.TrimSpace(chatTemplate)
	if t == "" {
		return Raw, true
	}
	for _, n := range Names {
		if t == n {
			return n, true
		}
	}
	switch {
	case strings.Contains(t, "<|im_start|>"):
		switch {
		case strings.Contains(t, defaultSystem[Qwen25]):
			return Qwen25, true
		case strings.Contains(t, "Reasoning Mode"):
			return SmolLM3, true
		case strings.Contains(t, defaultSystem[SmolLM2]):
			return SmolLM2, true
		}
		return ChatML, true
	case strings.Contains(t, "<|start_header_id|>"):
		if strings.Contains(t, "Cutting Knowledge Date") {
			return Llama31, true
		}
		return Llama3, true
	case strings.Contains(t, "<start_of_turn>"):
		return Gemma, true
	case strings.Contains(t, "<|user|>") && strings.Contains(t, "<|end|>"):
		return Phi3, true
	case strings.Contains(t, "[INST]"):
		return Llama2, true
	}
	return Default, false
}

// Render formats msgs. addGenerationPrompt appends the header that makes the
// model answer as the assistant (nothing for Llama2 and Raw, whose prompt
// already ends where the answer starts).
func Render(name string, msgs []llm.Message, addGenerationPrompt bool) (string, error) {
	return RenderWith(name, msgs, Options{}, addGenerationPrompt)
}

// RenderWith is Render with tools (tools.go): o.Tools are listed in the
// template's tool convention, and assistant messages with ToolCalls and
// RoleTool results are rendered as the template's calls and results. The
// ChatML and Llama3 families have such a convention; for the others tools
// are an error, and so are tool calls and results (Raw joins their
// contents).
//
// Differences from the templates' own renderings, all for prefix
// stability: no BOS (the tokenizer adds it); Phi3's template ends a
// conversation rendered without the generation prompt with its EOS token,
// this does not.
func RenderWith(name string, msgs []llm.Message, o Options, addGenerationPrompt bool) (string, error) {
	var sb strings.Builder
	for i, m := range msgs {
		if m.Role == "" {
			return "", fmt.Errorf("%w: message %d has no role", ErrRole, i)
		}
	}
	family := Family(name)
	if len(o.Tools) > 0 && !ListsTools(name) {
		return "", fmt.Errorf("%w: %q", ErrNoTools, name)
	}
	switch family {
	case ChatML:
		if d := defaultSystem[name]; d != "" && len(msgs) > 0 && msgs[0].Role != llm.RoleSystem {
			msgs = append([]llm.Message{{Role: llm.RoleSystem, Content: d}}, msgs...)
		}
		if err := renderChatML(&sb, msgs, o); err != nil {
			return "", err
		}
		if addGenerationPrompt {
			sb.WriteString("<|im_start|>assistant\n")
		}
	case Llama3:
		if err := renderLlama3(&sb, msgs, o, name == Llama31); err != nil {
			return "", err
		}
		if addGenerationPrompt {
			sb.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case Llama2:
		if err := renderLlama2(&sb, msgs); err != nil {
			return "", err
		}
	case Gemma:
		if err := renderGemma(&sb, msgs, addGenerationPrompt); err != nil {
			return "", err
		}
	case SmolLM3:
		if err := renderSmolLM3(&sb, msgs, addGenerationPrompt); err != nil {
			return "", err
		}
	case Phi3:
		if err := renderPhi3(&sb, msgs); err != nil {
			return "", err
		}
		if addGenerationPrompt {
			sb.WriteString("<|assistant|>\n")
		}
	case Raw:
		for i, m := range msgs {
			if i > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(m.Content)
		}
	default:
		return "", fmt.Errorf("%w: %q (want one of %s)", ErrUnknownTemplate, name, strings.Join(Names, ", "))
	}
	return sb.String(), nil
}

// renderGemma writes Gemma's turns. The system prompt opens the first user
// turn and that turn's text follows it, so the system prompt alone renders
// to a prefix of the conversation; a later system message becomes a user
// turn (the template has no place for it).
func renderGemma(sb *strings.Builder, msgs []llm.Message, addGenerationPrompt bool) error {
	open := false // a user turn holds the system prompt and awaits its text
	for i, m := range msgs {
		content := strings.TrimSpace(m.Content)
		switch m.Role {
		case llm.RoleSystem:
			if i == 0 {
				sb.WriteString("<start_of_turn>user\n" + m.Content + "\n\n")
				open = true
				continue
			}
			sb.WriteString("<start_of_turn>user\n" + content + "<end_of_turn>\n")
		case llm.RoleUser:
			if !open {
				sb.WriteString("<start_of_turn>user\n")
			}
			sb.WriteString(content + "<end_of_turn>\n")
		case llm.RoleAssistant:
			if open {
				sb.WriteString("<end_of_turn>\n")
			}
			sb.WriteString("<start_of_turn>model\n" + content + "<end_of_turn>\n")
		default:
			return fmt.Errorf("%w: %q in message %d (gemma knows system, user, assistant)", ErrRole, m.Role, i)
		}
		open = false
	}
	if addGenerationPrompt {
		if open {
			sb.WriteString("<end_of_turn>\n")
		}
		sb.WriteString("<start_of_turn>model\n")
	}
	return nil
}

// renderSmolLM3 writes SmolLM3's template (llama.cpp's copy of it, with
// enable_thinking false): the system block's custom instructions are the
// system message without "/think" and "/no_think" (or SmolLM's default
// line), a tool result is a user turn.
func renderSmolLM3(sb *strings.Builder, msgs []llm.Message, addGenerationPrompt bool) error {
	if len(msgs) == 0 {
		return nil
	}
	mode, custom := "/no_think", ""
	if msgs[0].Role == llm.RoleSystem {
		sys := msgs[0].Content
		switch {
		case strings.Contains(sys, "/no_think"):
		case strings.Contains(sys, "/think"):
			mode = "/think"
		}
		custom = strings.TrimRightFunc(strings.ReplaceAll(strings.ReplaceAll(sys, "/no_think", ""), "/think", ""), unicode.IsSpace)
	}
	switch {
	case custom != "":
		custom += "\n\n"
	case mode == "/think":
		return fmt.Errorf("%w: smollm3's /think mode without instructions (its long default prompt is not rendered)", ErrRole)
	default:
		custom = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n"
	}
	sb.WriteString("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: " + mode +
		"\n\n## Custom Instructions\n\n" + custom + "<|im_end|>\n")
	think := ""
	if mode == "/no_think" {
		think = "<think>\n\n</think>\n"
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleSystem:
			if i > 0 {
				return fmt.Errorf("%w: a system message after the first (smollm3 renders one)", ErrRole)
			}
		case llm.RoleUser:
			sb.WriteString("<|im_start|>user\n" + m.Content + "<|im_end|>\n")
		case llm.RoleAssistant:
			sb.WriteString("<|im_start|>assistant\n" + think + strings.TrimLeft(m.Content, "\n") + "<|im_end|>\n")
		case llm.RoleTool:
			sb.WriteString("<|im_start|>user\n" + m.Content + "<|im_end|>\n")
		default:
			return fmt.Errorf("%w: %q in message %d (smollm3 knows system, user, assistant, tool)", ErrRole, m.Role, i)
		}
	}
	if addGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n" + think)
	}
	return nil
}

// renderPhi3 writes Phi-3's turns; an empty system message is left out, as
// its template does.
func renderPhi3(sb *strings.Builder, msgs []llm.Message) error {
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleSystem:
			if m.Content == "" {
				continue
			}
		case llm.RoleUser, llm.RoleAssistant:
		default:
			return fmt.Errorf("%w: %q in message %d (phi3 knows system, user, assistant)", ErrRole, m.Role, i)
		}
		sb.WriteString("<|" + m.Role + "|>\n" + m.Content + "<|end|>\n")
	}
	return nil
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
	switch Family(name) {
	case ChatML, SmolLM3:
		return []string{"<|im_end|>", "<|im_start|>"}
	case Llama3:
		return []string{"<|eot_id|>", "<|start_header_id|>", "<|end_of_text|>"}
	case Llama2:
		return []string{"</s>", "[INST]"}
	case Gemma:
		return []string{"<end_of_turn>", "<start_of_turn>"}
	case Phi3:
		return []string{"<|end|>", "<|user|>", "<|endoftext|>"}
	}
	return nil
}
