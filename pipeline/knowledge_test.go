package pipeline

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

type oneFact struct{}

func (oneFact) Search(ctx context.Context, q string, topK int, minScore float64) ([]knowledge.Passage, error) {
	if !strings.Contains(q, "volcano") {
		return nil, nil
	}
	return []knowledge.Passage{{Title: "volcano", Text: "a fissure in the earth's crust"}}, nil
}

// TestEarlyStartWithKnowledge: the knowledge stage (llm/knowledge.Wrap)
// looks the stable partial up during the endpointing wait; the prefill and
// the final request carry the same passages, so the final reuses all but
// the template's last token, and the trace reports the knowledge mark and
// what was added.
func TestEarlyStartWithKnowledge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &partialASR{scripts: []asrScript{
			{partials: []timedPartial{{5, "what is a volcano"}}, final: "what is a volcano"},
		}}
		m := newPrefillLLM(prefillFast, answer("A volcano is a fissure in the earth's crust."))
		words := func(s string) int { return len(strings.Fields(s)) }
		wrapped := knowledge.Wrap(m, oneFact{}, knowledge.Options{CountTokens: words})
		h := newHarnessModel(t, earlyConfig(), a, wrapped, m.scriptedLLM, &toneTTS{rate: 16000, wordMs: 100})
		h.speak(400)
		outs := h.until("trace", isEvent(EventTrace))
		synctest.Wait()

		calls, _ := m.calls()
		reqs := m.requests()
		if len(calls) != 1 || len(reqs) != 1 {
			t.Fatalf("%d prefills and %d requests, want 1 and 1", len(calls), len(reqs))
		}
		want := "Facts that may help:\nvolcano: a fissure in the earth's crust\n\nQuestion: what is a volcano"
		for name, got := range map[string]string{"prefill": calls[0].req.Messages[1].Content, "final": reqs[0].Messages[1].Content} {
			if got != want {
				t.Errorf("%s user message %q, want %q", name, got, want)
			}
		}
		tr := events(outs, EventTrace)[0]
		if tr.CachedTokens != tr.PromptTokens-1 {
			t.Errorf("prompt %d, cached %d: want all but the last token reused", tr.PromptTokens, tr.CachedTokens)
		}
		if tr.KnowledgePassages != 1 || tr.KnowledgeTokens != words("Facts that may help:\nvolcano: a fissure in the earth's crust\n") {
			t.Errorf("trace knowledge: %d passages, %d tokens", tr.KnowledgePassages, tr.KnowledgeTokens)
		}
		k, ok1 := tr.Marks[MarkKnowledge]
		req, ok2 := tr.Marks[MarkLLMRequest]
		if !ok1 || !ok2 || k > req {
			t.Errorf("marks %v: want %s before %s", tr.Marks, MarkKnowledge, MarkLLMRequest)
		}
		h.close()
	})
}
