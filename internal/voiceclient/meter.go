package voiceclient

import (
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Meter measures a device's latencies from the audio it sends and receives:
// call Sent for every microphone frame, EndOfSpeech when the server reports
// a turn's final transcript, and Received for every answer frame. It is not
// safe for concurrent use, and allocates nothing per frame.
type Meter struct {
	inRate, outRate int

	// sent is the microphone audio of the last sentFrames frames, by level:
	// the end of speech is decided when it is asked for, against the noise
	// floor of all of it (audio.SpeechDBFS), because a recording's room noise
	// is often audible and counting it as speech under-stated heard latency
	// by up to speechEndSlack.
	sent    [sentFrames]sentFrame
	nSent   int // frames recorded (sent[nSent%sentFrames] is written next)
	scratch [sentFrames]float64

	cur   int // turn of the answer audio arriving now
	turns map[int]*turnTiming
}

// sentFrames of microphone audio are kept: 10 s of 20 ms frames, the
// longest a final transcript may lag the speech (partialGrace).
const sentFrames = 512

// windowsPerFrame bounds the audibility windows kept of a frame (5 ms
// windows: a 160 ms frame); a longer frame's later windows are judged as
// its last.
const windowsPerFrame = 32

// sentFrame is one microphone frame: when its last sample was captured,
// its length, its level and the levels of its audibility windows.
type sentFrame struct {
	at      time.Time
	samples int
	level   float64
	windows [windowsPerFrame]float32
	nWin    int
	winLen  int
}

// turnTiming is what Meter knows of one turn.
type turnTiming struct {
	speechEnd  time.Time // last speech sample sent before the final transcript
	firstAudio time.Time // first answer frame received
	heard      time.Time // when its first audible sample plays
	samples    int       // answer samples received
	final      time.Time // when the final transcript arrived
}

// NewMeter returns a Meter for microphone audio at inRate and answer audio
// at outRate.
func NewMeter(inRate, outRate int) *Meter {
	return &Meter{inRate: inRate, outRate: outRate, turns: map[int]*turnTiming{}}
}

func (m *Meter) turn(id int) *turnTiming {
	t, ok := m.turns[id]
	if !ok {
		t = &turnTiming{}
		m.turns[id] = t
	}
	return t
}

// Sent records a microphone frame sent at at; its last sample was captured
// just before.
func (m *Meter) Sent(pcm []int16, at time.Time) {
	f := &m.sent[m.nSent%sentFrames]
	m.nSent++
	f.at, f.samples, f.level = at, len(pcm), audio.LevelDBFS(pcm)
	f.winLen = audio.AudibleWindow(m.inRate)
	if n := (len(pcm) + f.winLen - 1) / f.winLen; n > windowsPerFrame {
		f.winLen = (len(pcm) + windowsPerFrame - 1) / windowsPerFrame
	}
	f.nWin = 0
	for start := 0; start < len(pcm); start += f.winLen {
		f.windows[f.nWin] = float32(audio.LevelDBFS(pcm[start:min(start+f.winLen, len(pcm))]))
		f.nWin++
	}
}

// EndOfSpeech says that turn's speech had ended by at: the last speech
// sample sent before at ends it. Call it when the turn's final transcript
// arrives, and again, more precisely, with the server's speech_end on the
// client's clock once the trace tells it (the final's arrival minus its
// asr_final mark): a slow recogniser's final may come after the next
// question began.
func (m *Meter) EndOfSpeech(turn int, at time.Time) {
	kept := min(m.nSent, sentFrames)
	for i := range kept {
		m.scratch[i] = m.sent[i].level
	}
	limit := audio.SpeechDBFS(audio.NoiseFloorDBFS(m.scratch[:kept]))
	for k := 1; k <= kept; k++ {
		f := &m.sent[(m.nSent-k)%sentFrames]
		if f.at.After(at) || !audio.SpeechFrame(f.level, limit) {
			continue
		}
		for w := f.nWin - 1; w >= 0; w-- {
			if float64(f.windows[w]) >= limit {
				end := min((w+1)*f.winLen, f.samples)
				m.turn(turn).speechEnd = f.at.Add(-samplesDur(f.samples-end, m.inRate))
				return
			}
		}
	}
}

// Transcribed records when turn's final transcript arrived (for
// HeardAfterFinalMs).
func (m *Meter) Transcribed(turn int, at time.Time) { m.turn(turn).final = at }

// HeardAfterFinalMs is when the answer's first audible sample played minus
// when the final transcript arrived: the answer's path after recognition
// (LLM, TTS, transport, playback), without the endpointing wait and the
// recogniser's time, which vary with load; ok is false until both are known.
func (m *Meter) HeardAfterFinalMs(turn int) (ms float64, ok bool) {
	t := m.turn(turn)
	return sinceMs(t.final, t.heard)
}

// Answering says that the answer audio arriving from now on is turn's (the
// server's answer events announce it).
func (m *Meter) Answering(turn int) { m.cur = turn }

// Received records an answer frame that arrived at at and returns whether
// it is the turn's first. The device plays frames as they come, one after
// another: a sample plays at the later of its arrival and the end of the
// samples before it.
func (m *Meter) Received(pcm []int16, at time.Time) (first bool) {
	t := m.turn(m.cur)
	first = t.firstAudio.IsZero()
	if first {
		t.firstAudio = at
	}
	if t.heard.IsZero() {
		if i := audio.FirstAudible(pcm, m.outRate); i >= 0 {
			queued := t.firstAudio.Add(samplesDur(t.samples+i, m.outRate))
			t.heard = later(at.Add(samplesDur(i, m.outRate)), queued)
		}
	}
	t.samples += len(pcm)
	return first
}

// PlayedMs is how much of turn's answer has played by now, if the device
// plays as audio arrives: what arrived, and no more than real time since
// its first frame.
func (m *Meter) PlayedMs(turn int, now time.Time) float64 {
	t := m.turn(turn)
	got := float64(t.samples) * 1000 / float64(m.outRate)
	if t.firstAudio.IsZero() {
		return got
	}
	return min(got, float64(now.Sub(t.firstAudio).Milliseconds()))
}

// VoiceToVoiceMs is the first answer frame's arrival minus the end of
// speech; ok is false until both are known.
func (m *Meter) VoiceToVoiceMs(turn int) (ms float64, ok bool) {
	t := m.turn(turn)
	return sinceMs(t.speechEnd, t.firstAudio)
}

// HeardMs is when the answer's first audible sample played minus the end of
// speech; ok is false until both are known.
func (m *Meter) HeardMs(turn int) (ms float64, ok bool) {
	t := m.turn(turn)
	return sinceMs(t.speechEnd, t.heard)
}

// AnswerMs is how much answer audio turn received.
func (m *Meter) AnswerMs(turn int) float64 {
	return float64(m.turn(turn).samples) * 1000 / float64(m.outRate)
}

func sinceMs(from, to time.Time) (float64, bool) {
	if from.IsZero() || to.IsZero() {
		return 0, false
	}
	return float64(to.Sub(from).Microseconds()) / 1000, true
}

func samplesDur(n, rate int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(rate))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
