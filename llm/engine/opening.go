package engine

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/voxpipe/voxpipe/llm"
)

// Answer openings for prompt lookup. A grounded answer quotes its passage,
// but it opens by restating the question's subject ("What is a volcano?"
// → "A volcano is a fissure ..."), which is in the prompt only in another
// order. Prompt lookup drafts those first tokens poorly (a token at a
// time, from whatever "is" or "a" it last saw), so a round or two of a
// short answer went by before the quote was reached. openings turns a
// closing "what/who is X?" question into the sentences an answer to it
// likely opens with; specRound proposes the rest of the first one the
// answer so far begins, continued by ordinary lookup (the passage). They
// are only proposals: the target verifies them like any other.

// questionRE matches a "what is X" question at the end of the last line
// of a user message (a knowledge prompt puts its passages before it), with
// or without its question mark (a recogniser's transcript has none).
var questionRE = regexp.MustCompile(`(?i)\b(what|who)\s+(is|are|was|were)\s+(?:(a|an|the)\s+)?([^?.!:\n]{1,60}?)\s*\??\s*$`)

// maxOpenings bounds the openings of one question.
const maxOpenings = 4

// openings returns the likely openings of an answer to the question that
// ends text ("What is a volcano?": "A volcano is a", "Volcano is"), or nil
// when it ends with no such question.
func openings(text string) []string {
	if i := strings.LastIndexByte(strings.TrimRight(text, " \n"), '\n'); i >= 0 {
		text = text[i+1:]
	}
	m := questionRE.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	verb, article, subject := strings.ToLower(m[2]), strings.ToLower(m[3]), strings.TrimSpace(m[4])
	if subject == "" || strings.ContainsAny(subject, ",;") {
		return nil
	}
	var out []string
	switch article {
	case "a", "an":
		// "An umbrella is a lightweight ...": a definition's own article
		// follows the verb.
		out = append(out, upperFirst(article)+" "+subject+" "+verb+" a")
	case "the":
		out = append(out, "The "+subject+" "+verb)
	}
	// "Bread is food ...", "Moon is the natural satellite ...".
	out = append(out, upperFirst(subject)+" "+verb)
	return out[:min(len(out), maxOpenings)]
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// openingRest returns what is left of the first opening that the answer
// so far begins and does not yet complete ("" when none).
func openingRest(opens []string, answer string) string {
	for _, o := range opens {
		if len(o) > len(answer) && strings.HasPrefix(o, answer) {
			return o[len(answer):]
		}
	}
	return ""
}

// openingsFor returns the openings of the request's last user message
// when prompt lookup drafts (nil otherwise).
func (e *Engine) openingsFor(msgs []llm.Message) []string {
	if e.spec == nil || e.spec.draft != nil {
		return nil
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return openings(msgs[i].Content)
		}
	}
	return nil
}

// openingDraft proposes into dst the rest of the opening that g's answer
// so far (history past the prompt) begins, followed by what prompt lookup
// finds after it when that is a strong match. It returns 0, and stops trying for g, once the answer
// has completed its opening or begun none.
func (e *Engine) openingDraft(g *generation, history, dst []int32) int {
	answer := history[min(len(g.prompt), len(history)):]
	rest := ""
	if len(answer) <= maxOpeningTokens {
		rest = openingRest(g.opens, e.tok.Decode(answer))
	}
	if rest == "" {
		g.opens = nil
		return 0
	}
	ids := e.tok.Encode(rest, false, false)
	k := copy(dst, ids)
	if k < len(dst) {
		// Continued only by a match of two tokens or more that runs on:
		// after "A chair is a" the most recent " a" of the prompt is as
		// likely another passage's ("... in a university") as the
		// definition's.
		ext := append(history, ids...) // scratch past history's end, as specRound does
		if n, ngram := lookupDraftN(ext, dst[k:], e.tok.IsControl); ngram >= 2 && !reachesEnd(dst[k:k+n], e.tok.IsControl) {
			k += n
		}
	}
	return k
}

// maxOpeningTokens bounds the answer tokens an opening can span.
const maxOpeningTokens = 16
