package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/internal/llmcli"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/knowledge"
)

const evalUsage = `usage: voxpipe eval answers --file Q.jsonl [--file ...] [--knowledge on|off|both] [--url http://HOST:PORT] [--config F] [--set k=v]

Asks each question (greedy, as a /v1 client: the user message alone, or after
pipeline.system_prompt with --system-prompt) and counts the answers that
contain one of its keywords (whole words, case-insensitive; a keyword may end
in * to match a prefix). Q.jsonl holds {"question": ..., "keywords": [...]} a line.
In-process by default (the config's engine and knowledge base); --url asks a
running server's /v1/chat/completions instead (its own knowledge setting).
`

type answerCase struct {
	Question string   `json:"question"`
	Keywords []string `json:"keywords"`
	file     string
}

func readAnswerCases(path string) ([]answerCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []answerCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c answerCase
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w (want {\"question\": ..., \"keywords\": [...]})", path, n, err)
		}
		if c.Question == "" || len(c.Keywords) == 0 {
			return nil, fmt.Errorf("%s:%d: needs a question and at least one keyword", path, n)
		}
		c.file = path
		out = append(out, c)
	}
	return out, sc.Err()
}

// answerHits reports whether answer contains a keyword as a whole word
// ("lava*" matches lava and lavas).
func answerHits(answer string, keywords []string) string {
	low := strings.ToLower(answer)
	for _, k := range keywords {
		k = strings.ToLower(strings.TrimSpace(k))
		pat := `\b` + regexp.QuoteMeta(strings.TrimSuffix(k, "*"))
		if !strings.HasSuffix(k, "*") {
			pat += `\b`
		}
		if regexp.MustCompile(pat).MatchString(low) {
			return k
		}
	}
	return ""
}

func (w *Wiring) evalAnswers(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("eval answers", flag.ContinueOnError)
	var files llmcli.StringList
	fs.Var(&files, "file", "question set, JSON lines (repeatable)")
	mode := fs.String("knowledge", "both", "on, off or both (in-process only)")
	url := fs.String("url", "", "ask this server's /v1/chat/completions instead of an in-process model")
	configPath := fs.String("config", w.DefaultConfig, "YAML config file")
	var sets multiFlag
	fs.Var(&sets, "set", "override one config key (repeatable)")
	system := fs.Bool("system-prompt", false, "send pipeline.system_prompt first, as the voice pipeline does")
	maxTokens := fs.Int("max-tokens", 96, "answer length limit")
	if _, err := llmcli.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: eval answers: --file is required\n%s", errCommandLine, evalUsage)
	}
	var cases []answerCase
	for _, f := range files {
		cs, err := readAnswerCases(f)
		if err != nil {
			return err
		}
		cases = append(cases, cs...)
	}
	cfg, err := w.LoadConfig(*configPath, "", sets)
	if err != nil {
		return err
	}
	type run struct {
		name string
		m    llm.Model
	}
	var runs []run
	if *url != "" {
		runs = append(runs, run{"server " + *url, &v1Client{base: strings.TrimSuffix(*url, "/")}})
	} else {
		if *mode != "on" && *mode != "off" && *mode != "both" {
			return fmt.Errorf("%w: --knowledge: want on, off or both (got %q)", errCommandLine, *mode)
		}
		model, closer, err := w.NewEngine(cfg)
		if err != nil {
			return err
		}
		defer closer.Close()
		if *mode != "on" {
			runs = append(runs, run{"knowledge off", model})
		}
		if *mode != "off" {
			k := cfg.Knowledge
			ix, err := w.OpenKnowledge(ctx, k, os.Stderr)
			if err != nil {
				return err
			}
			defer ix.Close()
			runs = append(runs, run{"knowledge on", knowledge.Wrap(model, ix, knowledge.Options{
				TopK: k.TopK, MinScore: k.MinScore, MaxContextTokens: k.MaxContextTokens, CountTokens: w.TokenCounter(model)})})
		}
	}
	for _, r := range runs {
		hits := map[string]int{}
		totals := map[string]int{}
		start := time.Now()
		for _, c := range cases {
			var msgs []llm.Message
			if *system && cfg.Pipeline.SystemPrompt != "" {
				msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: cfg.Pipeline.SystemPrompt})
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: c.Question})
			var aug llm.Augmentation
			actx := llm.WithObserver(ctx, func(a llm.Augmentation) { aug = a })
			ch, err := r.m.Stream(actx, llm.Request{Messages: msgs, MaxTokens: *maxTokens, Temperature: 0})
			if err != nil {
				return err
			}
			var answer strings.Builder
			for t := range ch {
				if t.Err != nil {
					return t.Err
				}
				answer.WriteString(t.Text)
			}
			a := strings.TrimSpace(answer.String())
			hit := answerHits(a, c.Keywords)
			mark := "MISS"
			if hit != "" {
				mark = "ok  "
				hits[c.file]++
			}
			totals[c.file]++
			fmt.Fprintf(out, "[%s] %s %q -> %q (passages %d)\n", r.name, mark, c.Question, a, aug.Passages)
		}
		for _, f := range files {
			fmt.Fprintf(out, "[%s] %s: %d/%d answers with a keyword (%.1f s)\n", r.name, f, hits[f], totals[f], time.Since(start).Seconds())
		}
	}
	return nil
}

// v1Client answers through a server's OpenAI-compatible API (greedy).
type v1Client struct{ base string }

func (c *v1Client) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	body, _ := json.Marshal(map[string]any{"messages": req.Messages, "temperature": 0, "max_tokens": req.MaxTokens})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Message llm.Message `json:"message"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.base, resp.Status, err)
	}
	if r.Error != nil || len(r.Choices) == 0 {
		msg := resp.Status
		if r.Error != nil {
			msg = r.Error.Message
		}
		return nil, fmt.Errorf("%s: %s", c.base, msg)
	}
	ch := make(chan llm.Token, 1)
	ch <- llm.Token{Text: r.Choices[0].Message.Content, Done: true}
	close(ch)
	return ch, nil
}
