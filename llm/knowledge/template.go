package knowledge

import "strings"

// The context template. Passages come first and the question last, so a
// prefill made from a partial transcript shares the whole passage block
// with the final request whenever both found the same passages:
//
//	Facts that may help:
//	<title>: <text>
//	<title>: <text>
//
//	Question: <the user's words>
//
// The demo assistant is trained on exactly this form (llm/train/grounding.py).
const (
	templateHead     = "Facts that may help:\n"
	templateQuestion = "\nQuestion: "
)

// Block renders the passage part of the template (empty for no passages).
func Block(ps []Passage) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(templateHead)
	for _, p := range ps {
		writePassage(&b, p)
	}
	return b.String()
}

func writePassage(b *strings.Builder, p Passage) {
	if p.Title != "" {
		b.WriteString(p.Title)
		b.WriteString(": ")
	}
	b.WriteString(p.Text)
	b.WriteByte('\n')
}

// Augment puts passages before the question in the template; with no
// passages the question is returned unchanged.
func Augment(question string, ps []Passage) string {
	if len(ps) == 0 {
		return question
	}
	return Block(ps) + templateQuestion + question
}

// Augmented reports whether a user message is already in the template's
// form (passages, then the question).
func Augmented(msg string) bool {
	return strings.HasPrefix(msg, templateHead) && strings.Contains(msg, templateQuestion)
}

// Fit keeps the passages, in order, whose block fits in maxTokens as counted
// by count; a first passage that alone is too long is cut at a word. With
// maxTokens <= 0 or a nil count every passage is kept.
func Fit(ps []Passage, maxTokens int, count func(string) int) []Passage {
	if maxTokens <= 0 || count == nil || len(ps) == 0 {
		return ps
	}
	var out []Passage
	for _, p := range ps {
		if count(Block(append(out, p))) <= maxTokens {
			out = append(out, p)
			continue
		}
		if len(out) == 0 { // the best passage, shortened to the budget
			words := strings.Fields(p.Text)
			lo, hi := 0, len(words) // the longest prefix that fits
			for lo < hi {
				mid := (lo + hi + 1) / 2
				q := p
				q.Text = strings.Join(words[:mid], " ")
				if count(Block([]Passage{q})) <= maxTokens {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			if lo > 0 {
				p.Text = strings.Join(words[:lo], " ")
				out = append(out, p)
			}
		}
		break
	}
	return out
}
