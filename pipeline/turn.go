package pipeline

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// turnPhase is where an assistant turn stands, as the turn manager sees it.
type turnPhase int

const (
	// phaseGenerating: the LLM, the TTS or the pacer still work on the turn.
	phaseGenerating turnPhase = iota
	// phaseTail: every frame was sent; the client may still be playing the
	// last OutputLeadMs of it, so speech still interrupts.
	phaseTail
	// phaseSettling: the turn was cut; its heard text is not known yet.
	phaseSettling
	// phaseDone: history holds what the person heard.
	phaseDone
)

// cutReason says why a turn ended before its audio did.
type cutReason int

const (
	cutNone   cutReason = iota
	cutServer           // the VAD heard the person speak (barge-in)
	cutClient           // the client sent interrupt
	cutFailed           // the TTS failed mid-turn
)

// heardMark says that the answer up to byte textEnd has been heard once
// outEnd samples (at OutputRate, from the start of the turn's audio) have
// been played.
type heardMark struct {
	textEnd int
	outEnd  int
}

// turn is one assistant answer. Fields are grouped by the goroutine that
// owns them; a field changes hands only through a channel send.
type turn struct {
	// Immutable after the turn manager creates the turn.
	id     int
	ctx    context.Context // cancelled on barge-in, failure or when the turn is done
	cancel context.CancelFunc
	trace  *traceRec
	req    llm.Request
	// tools are what the turn's model may call (nil: none); conv is the
	// conversation the calls run in.
	tools *tools.Set
	conv  *tools.Conversation
	// say, when set, is the turn's whole answer, spoken without the LLM
	// (a tool's notice: a timer going off).
	say string
	// cache is the turn's use of the answer cache (cache.go); nil when it
	// has none (off, or the question bypassed it).
	cache *turnCache
	// committed is set for a speculative answer (speculate.go) and closed
	// when it becomes the turn; nil for every other turn.
	committed chan struct{}

	// ttsHold is set by the LLM stage before it hands the TTS stage a
	// chunk, and released (once, by either) when the first chunk has been
	// synthesised or none will be (TTSGate).
	ttsHold *gateHold
	// Output samples of the turn handed to the pacer (by the TTS
	// forwarder) and sent by it: what is queued ahead of playback, for
	// TTSGate.
	queuedOut, sentOut atomic.Int64

	// Owned by the pacer until it reports the turn ended or flushed; the
	// turn manager reads them only after that report.
	sentSamples int         // audio handed to out, at OutputRate
	unplayed    int         // at a flush: samples sent but not yet due to have played
	words       []heardMark // in output order
	firstOut    bool        // first_audio_out marked
	ended       bool        // turn_end marked
	released    bool        // speculative: the commit came, its audio may go out
	dropped     bool        // speculative: discarded, its audio is dropped

	// Owned by the turn manager.
	promoted         bool // speculative and committed: an ordinary turn now
	discarded        bool // speculative and discarded
	phase            turnPhase
	cut              cutReason
	cutAt            time.Time
	answer           string        // the whole generated text, set when the LLM stage is done
	exchange         []llm.Message // the tool calls and results before the answer (llmEvent.exchange)
	llmDone          bool
	llmFailed        bool // the answer stopped early; what was already spoken plays out
	audioEnded       bool // the pacer sent the last frame
	flushed          bool // the pacer dropped the rest after a cut
	tailOver         bool // OutputLeadMs passed after the last frame
	played           int  // samples the client played; valid when playedKnown
	playedKnown      bool
	reportTimedOut   bool
	assistantWritten bool
	traceQueued      bool
	// backchannels the person said over the answer, for the history after
	// it (backchannel.go).
	backchannels []string
}

// heardText returns the prefix of answer whose words had all been played
// after played samples of the turn's audio.
func heardText(answer string, words []heardMark, played int) string {
	end := 0
	for _, w := range words {
		if w.outEnd <= played && w.textEnd > end {
			end = w.textEnd
		}
	}
	end = min(end, len(answer))
	for end > 0 && end < len(answer) && !utf8.RuneStart(answer[end]) {
		end--
	}
	return strings.TrimSpace(answer[:end])
}

// maxAlignSkip bounds how far alignChunk looks ahead in the answer for a
// chunk's next byte: the chunker drops only short runs (markdown markers,
// bullets), so a longer gap means the byte is not in the answer at all.
const maxAlignSkip = 32

// alignChunk maps a chunk of speakable text back onto the answer it was cut
// from. The chunker removes markdown and may change white space, so the
// chunk is matched as a subsequence of answer[from:], white space matching
// white space. ends[k] is the answer offset just after chunk[:k]; next is
// where the following chunk's search starts.
func alignChunk(answer string, from int, chunk string) (ends []int, next int) {
	ends = make([]int, len(chunk)+1)
	j := from
	ends[0] = j
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		limit := min(len(answer), j+maxAlignSkip)
		for k := j; k < limit; k++ {
			if answer[k] == c || (isSpace(answer[k]) && isSpace(c)) {
				j = k + 1
				break
			}
		}
		ends[i+1] = j
	}
	return ends, j
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// capHistory drops the oldest exchanges (a user message and what answered
// it: tool calls, tool results, the assistant's answer; never the system
// prompt) until at most limit messages besides it remain, or only the
// latest exchange does. Dropping whole exchanges keeps every tool result
// after the call it answers. limit 0 means no cap; a limit below 2 is
// treated as 2.
func capHistory(msgs []llm.Message, limit int) []llm.Message {
	if limit <= 0 {
		return msgs
	}
	limit = max(limit, 2)
	sys := 0
	if len(msgs) > 0 && msgs[0].Role == llm.RoleSystem {
		sys = 1
	}
	drop := 0
	for len(msgs)-sys-drop > limit {
		next := nextExchange(msgs[sys:], drop)
		if next < 0 {
			break
		}
		drop = next
	}
	if drop == 0 {
		return msgs
	}
	n := copy(msgs[sys:], msgs[sys+drop:])
	clear(msgs[sys+n:])
	return msgs[:sys+n]
}

// nextExchange is the index of the first user message after msgs[from], or
// -1 when msgs[from:] is one exchange.
func nextExchange(msgs []llm.Message, from int) int {
	for i := from + 1; i < len(msgs); i++ {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	return -1
}
