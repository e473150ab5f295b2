package llmcli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
)

// evalResult is what `voxpipe llm eval` prints with --json.
type evalResult struct {
	Model      string  `json:"model"`
	Documents  int     `json:"documents"`
	Tokens     int     `json:"tokens"` // predicted positions
	NLL        float64 `json:"nll_per_token"`
	Perplexity float64 `json:"perplexity"`
	// With --draft: how often the draft's greedy token equals the model's,
	// which is the acceptance rate of greedy speculative decoding per
	// proposed token.
	Draft          string   `json:"draft,omitempty"`
	DraftAgreement *float64 `json:"draft_agreement,omitempty"`
}

// llmEval scores a held-out file: JSON lines with {"messages": [...]} are
// rendered with the model's chat template and only the assistant answers
// (with their end-of-turn token) are scored — what an assistant is trained to
// produce; other lines are scored whole as text.
func llmEval(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	var ef engineFlags
	ef.register(fs)
	file := fs.String("file", "", "held-out text: JSON lines with messages, or plain text lines")
	draftPath := fs.String("draft", "", "a draft model (same vocabulary) to measure greedy agreement with")
	limit := fs.Int("limit", 0, "score at most this many documents (0 = all)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("%w: llm eval: --file is required\n%s", ErrUsage, llmUsage)
	}
	cfg, err := ef.config()
	if err != nil {
		return err
	}
	target, err := engine.Open(cfg)
	if err != nil {
		return err
	}
	defer target.Close()
	var draft *engine.Engine
	if *draftPath != "" {
		dcfg := cfg
		dcfg.ModelPath = *draftPath
		if draft, err = engine.Open(dcfg); err != nil {
			return err
		}
		defer draft.Close()
		if draft.Tokenizer().VocabSize() != target.Tokenizer().VocabSize() {
			return fmt.Errorf("llm eval: draft vocabulary has %d tokens, model %d", draft.Tokenizer().VocabSize(), target.Tokenizer().VocabSize())
		}
	}
	docs, err := readEvalDocs(*file)
	if err != nil {
		return err
	}
	if *limit > 0 && len(docs) > *limit {
		docs = docs[:*limit]
	}
	res := evalResult{Model: cfg.ModelPath, Draft: *draftPath}
	var nll float64
	var agree, compared int
	for _, doc := range docs {
		ids, scored, err := doc.tokens(target)
		if err != nil {
			return err
		}
		if len(ids) < 2 {
			continue
		}
		lp, greedy, err := target.Score(ctx, ids)
		if err != nil {
			return err
		}
		var dgreedy []int32
		if draft != nil {
			if _, dgreedy, err = draft.Score(ctx, ids); err != nil {
				return err
			}
		}
		// lp[i-1] and greedy[i-1] predict ids[i].
		for i := 1; i < len(ids); i++ {
			if !scored(i) {
				continue
			}
			nll -= lp[i-1]
			res.Tokens++
			if dgreedy != nil {
				compared++
				if dgreedy[i-1] == greedy[i-1] {
					agree++
				}
			}
		}
		res.Documents++
	}
	if res.Tokens == 0 {
		return fmt.Errorf("llm eval: %s: nothing to score", *file)
	}
	res.NLL = nll / float64(res.Tokens)
	res.Perplexity = math.Exp(res.NLL)
	if compared > 0 {
		a := float64(agree) / float64(compared)
		res.DraftAgreement = &a
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", " ")
		return enc.Encode(res)
	}
	fmt.Fprintf(out, "%s: %d documents, %d tokens, perplexity %.3f (nll %.4f)\n", res.Model, res.Documents, res.Tokens, res.Perplexity, res.NLL)
	if res.DraftAgreement != nil {
		fmt.Fprintf(out, "draft %s agrees with the greedy token %.1f%% of the time\n", res.Draft, 100**res.DraftAgreement)
	}
	return nil
}

// evalDoc is one held-out document: a conversation or plain text.
type evalDoc struct {
	text string
	msgs []llm.Message
}

// tokens returns the document's tokens (cut to the context) and which token
// positions count: every one for text, the assistant answers for a
// conversation. Answer spans are found by rendering the conversation up to
// each answer, which relies on the template being prefix-stable.
func (d evalDoc) tokens(e *engine.Engine) ([]int32, func(int) bool, error) {
	tok := e.Tokenizer()
	clip := func(ids []int32) []int32 { return ids[:min(len(ids), e.ContextSize())] }
	if d.msgs == nil {
		return clip(tok.Encode(d.text, true, true)), func(int) bool { return true }, nil
	}
	var spans [][2]int
	for k, m := range d.msgs {
		if m.Role != llm.RoleAssistant {
			continue
		}
		before, err := chat.Render(e.Template(), d.msgs[:k], true)
		if err != nil {
			return nil, nil, err
		}
		through, err := chat.Render(e.Template(), d.msgs[:k+1], false)
		if err != nil {
			return nil, nil, err
		}
		start := len(tok.Encode(before, true, true))
		end := len(tok.Encode(strings.TrimRight(through, "\n"), true, true))
		spans = append(spans, [2]int{start, end})
	}
	full, err := chat.Render(e.Template(), d.msgs, false)
	if err != nil {
		return nil, nil, err
	}
	return clip(tok.Encode(full, true, true)), func(i int) bool {
		for _, s := range spans {
			if i >= s[0] && i < s[1] {
				return true
			}
		}
		return false
	}, nil
}

// readEvalDocs reads one document per line: a {"messages": [...]} object or
// plain text.
func readEvalDocs(path string) ([]evalDoc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llm eval: %w", err)
	}
	defer f.Close()
	var docs []evalDoc
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		var d struct {
			Messages []llm.Message `json:"messages"`
		}
		if line[0] == '{' {
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				return nil, fmt.Errorf("llm eval: %s:%d: %w", path, n, err)
			}
			docs = append(docs, evalDoc{msgs: d.Messages})
			continue
		}
		docs = append(docs, evalDoc{text: line})
	}
	return docs, sc.Err()
}
