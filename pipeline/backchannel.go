package pipeline

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/voxpipe/voxpipe/llm"
)

// Backchannels: "mm-hm", "yeah", "okay" while the assistant speaks say the
// person is listening, not that they want the floor. They are kept in the
// history but do not cut the answer; "stop", "wait", a question and
// anything else do.
//
// The VAD hears speech long before the recogniser has its words, so with
// backchannels on a barge-in by speech is held: it cuts the answer once a
// partial transcript has a stop word ("stop", "wait"), once the speech has
// been voiced for BackchannelConfig.MaxMs (acknowledgements are short), or
// at a final transcript that is not a backchannel. Other partials do not
// decide: pocketsphinx's first partials of "okay", "right", "yes" read
// "the", "though", "i", "by" (TestBackchannelsWithPocketsphinx), so cutting
// on any partial that is no backchannel cut 72% of them. Without words
// configured every utterance interrupts, at BargeInMinSpeechMs, as before.

// BackchannelConfig lists the acknowledgements that do not interrupt.
type BackchannelConfig struct {
	// Words are the backchannels of every language the session may hear,
	// as the recogniser spells them (an entry may be several words, "i
	// see"). An utterance is a backchannel when it is made of entries
	// alone ("yeah yeah", "嗯嗯"); none: every utterance interrupts.
	Words []string
	// StopWords cut the answer as soon as a partial transcript has one
	// (entries matched as whole words; "hold on" is two); the other words
	// wait for the final transcript.
	StopWords []string
	// MaxMs of voiced speech interrupts whatever its words; 0 =
	// DefaultBackchannelMaxMs.
	MaxMs int
}

// DefaultBackchannelMaxMs: "mm-hm", "uh-huh", "yeah okay" last 300-700 ms.
const DefaultBackchannelMaxMs = 1000

// DefaultBackchannels are the English acknowledgements, spelt as
// pocketsphinx's en-us dictionary writes them, and common Mandarin ones.
func DefaultBackchannels() []string {
	return []string{
		"mm", "mhm", "mm-hm", "mm-hmm", "hm", "hmm", "uh-huh", "uh huh", "huh",
		"aha", "yeah", "yes", "yep", "yup", "ok", "okay", "right", "sure", "i see", "got it", "alright",
		"嗯", "对", "好", "好的", "是", "是的", "哦", "噢",
	}
}

// DefaultStopWords are the English and Mandarin words that interrupt at
// their first partial.
func DefaultStopWords() []string {
	return []string{"stop", "wait", "no", "hold on", "hang on", "pause", "enough", "quiet", "shut up", "cancel",
		"停", "等等", "等一下", "别说了", "不对"}
}

// backchannels matches transcripts against the configured entries.
type backchannels struct {
	entries []string // normalised
	stops   []string // normalised
	maxMs   int
}

func newBackchannels(c BackchannelConfig) (*backchannels, error) {
	if len(c.Words) == 0 {
		return nil, nil
	}
	if c.MaxMs < 0 {
		return nil, fmt.Errorf("%w: backchannel max %d ms: want >= 0", ErrConfig, c.MaxMs)
	}
	b := &backchannels{maxMs: c.MaxMs}
	if b.maxMs == 0 {
		b.maxMs = DefaultBackchannelMaxMs
	}
	for _, w := range c.Words {
		n, _ := normaliseWords(w)
		if n == "" {
			return nil, fmt.Errorf("%w: backchannel %q has no word in it", ErrConfig, w)
		}
		b.entries = append(b.entries, n)
	}
	for _, w := range c.StopWords {
		n, _ := normaliseWords(w)
		if n == "" {
			return nil, fmt.Errorf("%w: stop word %q has no word in it", ErrConfig, w)
		}
		b.stops = append(b.stops, n)
	}
	return b, nil
}

// stops says whether text has a stop word: a whole-word match, or for an
// entry in a script written without spaces, anywhere.
func (b *backchannels) stopped(text string) bool {
	if b == nil {
		return false
	}
	s, _ := normaliseWords(text)
	padded := " " + s + " "
	for _, e := range b.stops {
		if strings.Contains(padded, " "+e+" ") || (!isLatin(e) && strings.Contains(s, e)) {
			return true
		}
	}
	return false
}

// isLatin says whether s is all ASCII (words separated by spaces).
func isLatin(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// normaliseWords lower-cases text and turns every run of spaces and
// punctuation (but the hyphen and apostrophe inside words) into one space;
// question says whether it held a question mark.
func normaliseWords(text string) (norm string, question bool) {
	var sb strings.Builder
	space := true
	for _, r := range strings.ToLower(text) {
		switch {
		case r == '?' || r == '？':
			question = true
			fallthrough
		case unicode.IsSpace(r) || (unicode.IsPunct(r) && r != '-' && r != '\''):
			if !space {
				sb.WriteByte(' ')
				space = true
			}
		default:
			sb.WriteRune(r)
			space = false
		}
	}
	return strings.TrimSuffix(sb.String(), " "), question
}

// is says whether text is backchannels alone: not empty, no question, and
// every part of it an entry (entries may follow one another without a
// space, as Chinese is written).
func (b *backchannels) is(text string) bool {
	if b == nil {
		return false
	}
	s, question := normaliseWords(text)
	if s == "" || question {
		return false
	}
	// ok[i]: s[:i] is a sequence of entries. Transcripts are a few words.
	ok := make([]bool, len(s)+1)
	ok[0] = true
	for i := 0; i < len(s); i++ {
		if !ok[i] {
			continue
		}
		if s[i] == ' ' {
			ok[i+1] = true
			continue
		}
		for _, e := range b.entries {
			if strings.HasPrefix(s[i:], e) {
				ok[i+len(e)] = true
			}
		}
	}
	return ok[len(s)]
}

// holdsBargeIn says whether speech over the answer waits for its words.
func (h *hub) holdsBargeIn() bool { return h.bc != nil }

// holdBargeIn makes the barge-in by utterance utt's speech wait for its
// words (true), unless a partial of it already had a stop word (false:
// barge in now).
func (h *hub) holdBargeIn(utt int) bool {
	if p := h.partialSeen; p.utt != nil && p.utt.utt == utt && h.bc.stopped(p.text) {
		return false
	}
	h.heldUtt = utt
	h.log.Debug().Int("utterance", utt).Msg("speech while the answer plays: held until its words show it is no backchannel")
	return true
}

// heldPartial cuts the answer when a partial of the held utterance has a
// stop word.
func (h *hub) heldPartial(utt int, text string) {
	if h.heldUtt == 0 || utt != h.heldUtt || !h.bc.stopped(text) {
		return
	}
	if t := h.cur; t != nil && h.cfg.BargeIn && interruptible(t) {
		h.log.Debug().Str("partial", text).Msg("barge-in: a stop word over the answer")
		h.cutTurn(t, cutServer, time.Now())
	}
	h.heldUtt = 0
}

// longSpeech cuts the answer when the held utterance outlasted a
// backchannel.
func (h *hub) longSpeech(m inputEvent) {
	if h.heldUtt == 0 || m.utt != h.heldUtt {
		return
	}
	if t := h.cur; t != nil && h.cfg.BargeIn && interruptible(t) {
		h.log.Debug().Int("max_ms", h.bc.maxMs).Msg("barge-in: speech over the answer too long for a backchannel")
		h.cutTurn(t, cutServer, m.at)
	}
	h.heldUtt = 0
}

// backchannel takes a final transcript heard over the playing turn t: a
// backchannel is kept for the history and the answer goes on (true); any
// other words are a barge-in for the caller (false).
func (h *hub) backchannel(t *turn, tr *traceRec, text string) bool {
	if tr != nil && tr.utt == h.heldUtt {
		h.heldUtt = 0
	}
	if !h.bc.is(text) || (tr != nil && tr.utt <= t.trace.utt) {
		return false
	}
	h.log.Debug().Str("text", text).Msg("backchannel while the answer plays: kept, not a barge-in")
	h.event(&Event{Type: EventTranscript, Turn: t.id, Text: text, Final: true, Backchannel: true})
	t.backchannels = append(t.backchannels, text)
	if !t.assistantWritten {
		return true // written after the answer (writeAssistant)
	}
	h.s.histMu.Lock()
	h.s.history = appendBackchannels(h.s.history, []string{text})
	h.s.histMu.Unlock()
	return true
}

// appendBackchannels adds what the person said over an answer after it, as
// a user message (joined to one already there), so the history still
// alternates: the next user turn joins it too (joinUser).
func appendBackchannels(history []llm.Message, said []string) []llm.Message {
	if len(said) == 0 {
		return history
	}
	return joinUser(history, strings.Join(said, " "))
}

// joinUser appends a user message, or joins text to the user message the
// history ends with (a backchannel).
func joinUser(history []llm.Message, text string) []llm.Message {
	if n := len(history); n > 0 && history[n-1].Role == llm.RoleUser {
		history[n-1].Content += " " + text
		return history
	}
	return append(history, llm.Message{Role: llm.RoleUser, Content: text})
}
