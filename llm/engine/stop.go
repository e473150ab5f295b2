package engine

import "strings"

// stopMatcher holds back streamed text that might be the start of a stop
// string, so a stop string is never emitted, not even in part.
type stopMatcher struct {
	stops   []string
	pending string
}

func (m *stopMatcher) reset(stops []string) {
	m.stops = m.stops[:0]
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	m.pending = ""
}

// push adds text and returns what may be emitted now; stopped is true when
// a stop string was found (emit then holds the text before it).
func (m *stopMatcher) push(text string) (emit string, stopped bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	buf := m.pending + text
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		m.pending = ""
		return buf[:first], true
	}
	hold := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(buf)); k > hold; k-- {
			if strings.HasSuffix(buf, s[:k]) {
				hold = k
				break
			}
		}
	}
	m.pending = buf[len(buf)-hold:]
	return buf[:len(buf)-hold], false
}

// flush returns the held-back text at the end of generation.
func (m *stopMatcher) flush() string {
	s := m.pending
	m.pending = ""
	return s
}
