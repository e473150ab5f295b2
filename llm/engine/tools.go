package engine

import (
	"fmt"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
)

// toolPrompt is how a request's prompt offers tools.
type toolPrompt struct {
	opts chat.Options // the tools rendered into the prompt; none: no tool block, no call parsing
	// suffix follows the generation prompt: ToolChoice "required" on ChatML
	// opens the call (chat.CallOpen and a newline), so the model can only
	// write one; the answer is then read from inside the call.
	suffix string
}

func (t toolPrompt) offered() bool { return len(t.opts.Tools) > 0 }

// CanCallTools is nil when requests may offer tools to the model, else why
// not (chat.ErrNoTools: its chat template has no tool-call convention).
func (e *Engine) CanCallTools() error {
	if !chat.ListsTools(e.template) {
		return fmt.Errorf("%w: %q (tools need a ChatML or Llama 3 family template)", chat.ErrNoTools, e.template)
	}
	return nil
}

// toolPrompt checks a request's tools and tool messages and decides how the
// prompt offers them. ToolChoice "none" renders no tools (a model that sees
// none calls none; its text is not parsed for calls either).
func (e *Engine) toolPrompt(req *llm.Request) (toolPrompt, error) {
	if err := llm.ValidateToolMessages(req.Messages); err != nil {
		return toolPrompt{}, err
	}
	switch req.ToolChoice {
	case llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
	default:
		return toolPrompt{}, fmt.Errorf("tool_choice %q (want \"\", none or required)", req.ToolChoice)
	}
	if len(req.Tools) == 0 || req.ToolChoice == llm.ToolChoiceNone {
		if req.ToolChoice == llm.ToolChoiceRequired {
			return toolPrompt{}, fmt.Errorf("tool_choice required with no tools")
		}
		return toolPrompt{}, nil
	}
	seen := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		if t.Name == "" || seen[t.Name] {
			return toolPrompt{}, fmt.Errorf("tool %d: a tool needs a name of its own (%q)", i, t.Name)
		}
		seen[t.Name] = true
	}
	tp := toolPrompt{opts: chat.Options{Tools: req.Tools, ToolFormat: e.tools}}
	if req.ToolChoice == llm.ToolChoiceRequired && chat.Family(e.template) == chat.ChatML {
		tp.suffix = chat.CallOpen + "\n"
	}
	return tp, nil
}

// callParser reads the calls of an answer to a prompt that offered tools.
func (e *Engine) callParser(tp toolPrompt) *chat.CallParser {
	if !tp.offered() {
		return nil
	}
	p := chat.NewCallParser(e.template, func() string { return fmt.Sprintf("call_%d", e.callSeq.Add(1)) })
	if p != nil && tp.suffix != "" {
		p.StartInCall()
	}
	return p
}

// flushCalls passes the answer's last text through the call parser and ends
// it: *text becomes what is left to speak, and the calls still held are
// returned.
func (g *generation) flushCalls(text *string) ([]llm.ToolCall, error) {
	if g.calls == nil {
		return nil, nil
	}
	emit, calls, err := g.calls.Push(*text)
	if err != nil {
		*text = emit
		return nil, err
	}
	rest, more, err := g.calls.Flush()
	*text = emit + rest
	return append(calls, more...), err
}
