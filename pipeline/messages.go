package pipeline

import (
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

// Typed messages between the stages (see doc.go for the graph).

// asrCmdKind says what an asrCmd asks of the ASR stage.
type asrCmdKind int

const (
	asrStart asrCmdKind = iota // open a stream and feed it pcm (the VAD pre-roll)
	asrFrame                   // feed pcm (a ring slot, see audioIn.forward)
	asrEnd                     // close the stream and deliver its final
	asrPause                   // semantic mode: a pause began here; report it once the audio before it is recognised
	// asrSplit (Config.PauseFinal): end the recogniser's utterance here and
	// report its final as the partial, then the pause (seq); the stream
	// stays closed until asrResume or asrEnd.
	asrSplit
	// asrResume: speech after an asrSplit; recognition starts again from
	// the utterance's first sample.
	asrResume
)

// asrCmd goes from the audio-in stage to the ASR stage.
type asrCmd struct {
	kind  asrCmdKind
	pcm   []int16   // 16 kHz
	trace *traceRec // asrStart: the utterance's marks
	seq   int       // asrPause, asrSplit: the pause's number in the session
}

// inputKind says what an inputEvent reports.
type inputKind int

const (
	inputSpeech     inputKind = iota // speech lasted BargeInMinSpeechMs
	inputClient                      // a client event (playback_start, interrupt)
	inputResume                      // semantic mode: speech again after a pause (seq)
	inputTurnLimit                   // the utterance reached Config.MaxTurn and was ended there
	inputCommit                      // the utterance ended (its final transcript is on its way)
	inputLongSpeech                  // voiced speech outlasted a backchannel (backchannel.go)
)

// inputEvent goes from the audio-in stage to the turn manager.
type inputEvent struct {
	kind  inputKind
	utt   int // inputSpeech, inputResume, inputCommit, inputTurnLimit: the utterance's number
	seq   int // inputResume: the pause's number
	event ClientEvent
	at    time.Time
}

// asrEvent goes from the ASR stage to the turn manager.
type asrEvent struct {
	trace *traceRec
	text  string
	final bool
	err   error
	// pause > 0: not a transcript but the pause of that number, reported
	// after every frame before it was recognised (the partials are current).
	pause int
	// pauseFinal: the partial before this pause is the recogniser's final
	// for the words so far (asrSplit).
	pauseFinal bool
}

// llmEvent goes from the LLM stage to the turn manager: a delta, or done.
type llmEvent struct {
	t      *turn
	delta  string
	done   bool
	answer string // done: the whole text generated
	err    error  // done: why the stream failed (nil when it ended normally or was cancelled)
	// exchange (done): the assistant tool-call and tool result messages of
	// the turn's rounds, in order, for the history before the answer.
	exchange []llm.Message
	// event: a tool_call or tool_result event for the client (not done)
	event *Event
}

// ttsJob goes from the LLM stage to the TTS stage: one chunk to speak.
type ttsJob struct {
	t    *turn
	text string
	ends []int // ends[k]: answer offset after text[:k] (alignChunk)
	last bool  // the turn's text is complete after this job
	// replay, when set, is text's audio from the answer cache: the TTS
	// stage forwards it instead of synthesising (cache.go).
	replay *answercache.Piece
}

// ttsCallKind marks the structure of the TTS stage's output.
type ttsCallKind int

const (
	callBegin   ttsCallKind = iota // the chunks that follow belong to job
	callEnd                        // job's Synthesize returned
	callTurnEnd                    // no more audio for the turn
)

// ttsCall goes from the TTS stage to the TTS forwarder, interleaved with the
// engine's chunks on a second channel; both are unbuffered, so the forwarder
// sees them in the order the TTS stage produced them.
type ttsCall struct {
	kind ttsCallKind
	job  ttsJob
}

// ttsFailure goes from the TTS stage to the turn manager.
type ttsFailure struct {
	t   *turn
	err error
}

// pacedAudio goes from the TTS forwarder to the pacer: audio at OutputRate
// (ownership passes) and the word marks that end inside it, or end.
type pacedAudio struct {
	t     *turn
	pcm   []int16
	marks []heardMark
	end   bool
}

// outCtl goes from the turn manager to the pacer: an event to send, a turn
// whose trace to send, or a flush after a cut. The turn manager queues them
// in order, so a turn's trace follows its transcript and answer events.
type outCtl struct {
	event *Event
	trace *turn
	flush *turn
	// Speculative answers: release sends the held audio, discard drops it.
	release, discard *turn
	// flush: notify sends an interrupted event; clientStopped says the
	// client no longer plays what it holds, so the lead budget is free again.
	notify, clientStopped bool
}

// pacerReportKind says how a turn's audio ended.
type pacerReportKind int

const (
	reportEnded   pacerReportKind = iota // the last frame was sent
	reportFlushed                        // the rest was dropped (outCtl.flush)
)

// pacerReport goes from the pacer to the turn manager. After it, the turn's
// pacer-owned fields belong to the turn manager.
type pacerReport struct {
	t    *turn
	kind pacerReportKind
}
