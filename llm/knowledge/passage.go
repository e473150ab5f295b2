// Package knowledge puts a local knowledge base into LLM requests: Wrap
// looks the last user message up (a Searcher, e.g. llm/knowledge/store) and
// puts the best passages before it in a fixed template. It imports no index,
// so it works with any backend and any Searcher.
package knowledge

import "errors"

// Passage is one retrievable piece of text.
type Passage struct {
	Title  string  `json:"title"`
	Text   string  `json:"text"`
	Kind   string  `json:"kind,omitempty"`   // store.KindNoun, ... (the index's kinds)
	Source string  `json:"source,omitempty"` // the file (and line) it came from; "" for the dictionary
	Score  float64 `json:"score,omitempty"`  // the reranked score of a search hit
}

// ErrNotReady is returned by a Searcher whose index is still being built;
// Wrap then sends the request without context and reports nothing.
var ErrNotReady = errors.New("knowledge: index not ready")
