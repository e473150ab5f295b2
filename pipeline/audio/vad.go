package audio

import (
	"fmt"
	"math"

	"github.com/voxpipe/voxpipe/pipeline/audio/silero"
)

// Speech detectors (VADConfig.Detector).
const (
	// DetectorEnergy: a frame is speech when its energy is ThresholdDB over
	// the adaptive noise floor.
	DetectorEnergy = "energy"
	// DetectorSilero: a frame is speech when Silero VAD's probability for
	// the latest 32 ms reaches SpeechProb (package silero). It tells speech
	// from noise that is as loud, where the energy test cannot.
	DetectorSilero = "silero"
)

// VADConfig configures the VAD.
type VADConfig struct {
	SampleRate   int     // of the frames given to Process (16000 in the pipeline)
	FrameMs      int     // 20
	StartMs      int     // speech needed before SpeechStart (e.g. 100)
	EndSilenceMs int     // endpointing: silence after speech before SpeechEnd (e.g. 500)
	PreRollMs    int     // audio kept before SpeechStart and handed to ASR (e.g. 300)
	ThresholdDB  float64 // speech = frame energy this far above the adaptive noise floor
	Detector     string  // DetectorEnergy ("" too) or DetectorSilero
	SpeechProb   float64 // DetectorSilero: speech from this probability on (0 = 0.5)
}

// DefaultVADConfig returns the pipeline's VAD settings.
func DefaultVADConfig() VADConfig {
	return VADConfig{
		SampleRate: 16000,
		FrameMs:    20,
		// 100 ms of continuous energy: shorter lets clicks, coughs and
		// keyboard noise start turns (and barge in on the bot); longer delays
		// nothing that matters, because the pre-roll hands ASR the onset
		// anyway. pocketsphinx's VAD uses the same 100 ms (-vad_startspeech 10).
		StartMs: 100,
		// Endpointing is the one VAD setting on the voice-to-voice path: the
		// turn cannot end before it. Measured with pocketsphinx's VAD on 40
		// TTS sentences (voice-engines.md §5.8), 0.5 s split no utterance,
		// 0.3 s split 3 of 40 and 0.2 s split 7 of 40. This VAD (hysteresis
		// keeps it in speech through soft syllables) split 1 of 16 read and
		// TTS sentences at 0.2 s and none from 0.3 s up, but conversational
		// speech adds hesitation pauses that read speech lacks. A split turn
		// makes the bot answer half a sentence, which costs far more than
		// 200 ms, so keep 0.5 s; the turn manager can prefill the LLM during
		// the hangover.
		EndSilenceMs: 500,
		// 300 ms before the 100 ms trigger run covers soft onsets (fricatives,
		// plosive closures, a breath) that stay under the threshold.
		PreRollMs: 300,
		// 10 dB over the floor: clear of steady-noise fluctuation (a few dB
		// for 20 ms frames) yet low enough for unvoiced consonants at a
		// normal speaking distance. Inside speech the VAD holds on down to
		// ThresholdDB-vadHysteresisDB so trailing syllables are not cut.
		ThresholdDB: 10,
		Detector:    DetectorEnergy,
		// Silero's own recommendation; in speech the VAD holds on down to
		// SpeechProb-vadProbHysteresis.
		SpeechProb: 0.5,
	}
}

// Noise floor tracking constants.
const (
	// vadMinFloorDB is the lowest noise floor the VAD believes in (dBFS).
	// Digital silence would otherwise drive the floor to -100 dB and let
	// any hiss count as speech; with it, speech must reach at least
	// vadMinFloorDB+ThresholdDB (-60 dBFS by default).
	vadMinFloorDB = -70.0
	// vadSilenceDB: frames quieter than this are digital silence (padding,
	// a muted or noise-suppressed input). They carry no information about
	// the room, so they neither start the floor nor move it.
	vadSilenceDB = -90.0
	// vadInitCeilDB caps the floor taken from the first frame, so a stream
	// that starts in the middle of a word still detects it.
	vadInitCeilDB = -45.0
	// vadFloorDown is the per-frame fraction of the gap closed when a quiet
	// frame is below the floor: about 5 frames (100 ms) to follow a drop.
	vadFloorDown = 0.3
	// vadFloorUp is the same for frames above the floor (but below the
	// speech threshold): a 1 s time constant at 20 ms frames, slow enough
	// that the start of a soft word cannot lift the floor over itself.
	vadFloorUp = 0.02
	// vadHysteresisDB lowers the threshold once in speech.
	vadHysteresisDB = 3.0
	// The floor also follows the minimum frame energy over the last
	// vadMinWindowBlocks*vadMinBlockMs (2.5 s), in any state. Speech dips
	// to the floor between words far more often than that, so the minimum
	// only exceeds the floor when the "speech" is really a new, louder
	// steady noise: then the floor jumps up to it and the false utterance
	// ends after EndSilenceMs, instead of lasting forever.
	vadMinBlockMs      = 250
	vadMinWindowBlocks = 10
	// dcBlockPole is the DC blocker's pole (a 1st-order high-pass, ~13 Hz at
	// 16 kHz): a microphone's DC offset or hum would otherwise count as energy.
	dcBlockPole = 0.995
	// vadProbHysteresis lowers SpeechProb once in speech (as Silero's own
	// speech-timestamp code does), so a soft syllable does not count as
	// silence.
	vadProbHysteresis = 0.15
	// vadQuietFloorDB: with DetectorSilero, a room whose noise floor is
	// under this (dBFS) is quiet enough for the energy test to end speech
	// (bench rooms: 0-5 dB pink split 26 of 22 utterances without the
	// limit; with it clean turns end 60 ms sooner and no noisy one splits).
	vadQuietFloorDB = -50.0
)

// VADEvent is what one VAD.Process call reports.
type VADEvent int

// VAD events.
const (
	VADNone        VADEvent = iota // no change
	VADSpeechStart                 // speech began StartMs ago; fetch PreRoll now
	VADSpeechEnd                   // EndSilenceMs of silence after speech
)

func (e VADEvent) String() string {
	switch e {
	case VADNone:
		return "none"
	case VADSpeechStart:
		return "speech_start"
	case VADSpeechEnd:
		return "speech_end"
	}
	return fmt.Sprintf("VADEvent(%d)", int(e))
}

// VAD is a voice activity detector. With DetectorEnergy a frame is speech
// when its energy is ThresholdDB above an adaptive noise floor; with
// DetectorSilero when the neural network's speech probability reaches
// SpeechProb (the floor is still tracked, for LastEnergyDB and
// NoiseFloorDB, and digital silence is never speech). The floor follows
// quiet frames quickly downward and slowly upward and is frozen during
// speech (see the vad* constants for the one exception). StartMs of speech
// frames start an utterance; EndSilenceMs of non-speech frames end it. A
// ring buffer keeps PreRollMs of audio before the speech run, so ASR also
// hears the soft start of the first word.
type VAD struct {
	cfg          VADConfig
	startFrames  int
	endFrames    int
	blockFrames  int
	frameSamples int

	inSpeech    bool
	speechRun   int // consecutive speech frames (outside speech)
	silenceRun  int // consecutive non-speech frames (inside speech)
	floorDB     float64
	haveFloor   bool
	lastDB      float64
	dcX, dcY    float32 // DC blocker state
	blockMin    float64 // minimum frame energy in the current block
	blockCount  int     // frames in the current block
	blockMins   [vadMinWindowBlocks]float64
	blocksSeen  int // completed blocks since Reset (saturates)
	blockCursor int

	ring     []int16 // pre-roll ring buffer, fixed length
	ringNext int     // write position
	ringFill int     // samples written, up to len(ring)

	// DetectorSilero only: the network, the samples of its next window,
	// and the probability of the last complete one.
	neural *silero.Detector
	window []float32 // up to silero.WindowSize
	prob   float32
}

// NewVAD validates cfg and returns a VAD.
func NewVAD(cfg VADConfig) (*VAD, error) {
	switch {
	case cfg.SampleRate < 8000 || cfg.SampleRate > 48000:
		return nil, fmt.Errorf("%w: vad sample rate %d Hz (want 8000..48000)", ErrConfig, cfg.SampleRate)
	case cfg.FrameMs < 5 || cfg.FrameMs > 100 || cfg.SampleRate*cfg.FrameMs%1000 != 0:
		return nil, fmt.Errorf("%w: vad frame of %d ms at %d Hz (want 5..100 ms, whole samples)", ErrConfig, cfg.FrameMs, cfg.SampleRate)
	case cfg.StartMs < 0 || cfg.EndSilenceMs <= 0 || cfg.PreRollMs < 0:
		return nil, fmt.Errorf("%w: vad StartMs %d, EndSilenceMs %d, PreRollMs %d (want >= 0, > 0, >= 0)", ErrConfig, cfg.StartMs, cfg.EndSilenceMs, cfg.PreRollMs)
	case !(cfg.ThresholdDB > 0 && cfg.ThresholdDB < 60):
		return nil, fmt.Errorf("%w: vad threshold %g dB (want 0 < dB < 60)", ErrConfig, cfg.ThresholdDB)
	case cfg.Detector != "" && cfg.Detector != DetectorEnergy && cfg.Detector != DetectorSilero:
		return nil, fmt.Errorf("%w: vad detector %q (want %s or %s)", ErrConfig, cfg.Detector, DetectorEnergy, DetectorSilero)
	case cfg.Detector == DetectorSilero && cfg.SampleRate != silero.SampleRate:
		return nil, fmt.Errorf("%w: the silero vad runs at %d Hz, not %d", ErrConfig, silero.SampleRate, cfg.SampleRate)
	case cfg.SpeechProb != 0 && !(cfg.SpeechProb > vadProbHysteresis && cfg.SpeechProb < 1):
		return nil, fmt.Errorf("%w: vad speech probability %g (want %g < p < 1)", ErrConfig, cfg.SpeechProb, vadProbHysteresis)
	}
	if cfg.SpeechProb == 0 {
		cfg.SpeechProb = DefaultVADConfig().SpeechProb
	}
	ceilDiv := func(a, b int) int { return (a + b - 1) / b }
	v := &VAD{
		cfg:          cfg,
		startFrames:  max(1, ceilDiv(cfg.StartMs, cfg.FrameMs)),
		endFrames:    max(1, ceilDiv(cfg.EndSilenceMs, cfg.FrameMs)),
		blockFrames:  max(1, ceilDiv(vadMinBlockMs, cfg.FrameMs)),
		frameSamples: cfg.SampleRate * cfg.FrameMs / 1000,
	}
	preRollSamples := cfg.SampleRate * cfg.PreRollMs / 1000
	v.ring = make([]int16, preRollSamples+v.startFrames*v.frameSamples)
	if cfg.Detector == DetectorSilero {
		m, err := silero.Default()
		if err != nil {
			return nil, fmt.Errorf("vad: %w", err)
		}
		v.neural = m.NewDetector()
		v.window = make([]float32, 0, silero.WindowSize)
	}
	v.Reset()
	return v, nil
}

// Config returns the configuration the VAD runs with.
func (v *VAD) Config() VADConfig { return v.cfg }

// Reset returns the VAD to its initial state (no speech, no floor, empty pre-roll).
func (v *VAD) Reset() {
	v.inSpeech = false
	v.speechRun, v.silenceRun = 0, 0
	v.floorDB, v.haveFloor, v.lastDB = vadMinFloorDB, false, -100
	v.dcX, v.dcY = 0, 0
	v.blockMin, v.blockCount, v.blocksSeen, v.blockCursor = math.Inf(1), 0, 0, 0
	v.ringNext, v.ringFill = 0, 0
	if v.neural != nil {
		v.neural.Reset()
		v.window, v.prob = v.window[:0], 0
	}
}

// InSpeech reports whether an utterance is in progress (between
// VADSpeechStart and VADSpeechEnd).
func (v *VAD) InSpeech() bool { return v.inSpeech }

// NoiseFloorDB returns the current noise floor estimate in dBFS.
func (v *VAD) NoiseFloorDB() float64 { return v.floorDB }

// LastEnergyDB returns the energy of the last frame in dBFS.
func (v *VAD) LastEnergyDB() float64 { return v.lastDB }

// SpeechProb returns the neural detector's probability for the last
// complete 32 ms window (0 with DetectorEnergy).
func (v *VAD) SpeechProb() float32 { return v.prob }

// Process analyses one FrameMs frame and reports a state change. It does
// not allocate. Frames of another length work but shift the timing.
func (v *VAD) Process(frame []int16) VADEvent {
	v.remember(frame)
	if v.neural != nil {
		v.listen(frame)
	}
	e := v.energyDB(frame)
	v.lastDB = e
	if e < vadSilenceDB {
		return v.step(false)
	}
	if !v.haveFloor {
		v.floorDB = max(vadMinFloorDB, min(e, vadInitCeilDB))
		v.haveFloor = true
	}
	v.trackMinimum(e)

	threshold := v.floorDB + v.cfg.ThresholdDB
	if v.inSpeech {
		threshold -= vadHysteresisDB
	}
	speech := e > threshold
	if v.neural != nil {
		p := v.cfg.SpeechProb
		if v.inSpeech {
			p -= vadProbHysteresis
		}
		// In a quiet room a frame under the energy threshold ends speech
		// too: the network's probability falls a window or two (32-64 ms)
		// after the last word, the energy at once, and every frame of that
		// is on the heard latency. In a noisy one (the floor over
		// vadQuietFloorDB) only the network decides: there the energy test
		// takes weak syllables for silence and splits utterances.
		speech = float64(v.prob) >= p && (!v.inSpeech || v.floorDB > vadQuietFloorDB || e > threshold)
	}

	// Floor tracking: never from speech frames or frames that may begin
	// speech; in speech only downward (which can only make the VAD more
	// sensitive, never swallow the utterance).
	if !speech && e < v.floorDB {
		v.floorDB = max(vadMinFloorDB, v.floorDB+vadFloorDown*(e-v.floorDB))
	} else if !speech && !v.inSpeech {
		v.floorDB += vadFloorUp * (e - v.floorDB)
	}
	return v.step(speech)
}

// listen feeds frame to the network, which runs each time a 32 ms window
// is complete (every 1.6 frames of 20 ms): each frame is judged by the
// latest complete window, at most 32 ms old.
func (v *VAD) listen(frame []int16) {
	for len(frame) > 0 {
		n := min(len(frame), silero.WindowSize-len(v.window))
		for _, s := range frame[:n] {
			v.window = append(v.window, float32(s)/32768)
		}
		frame = frame[n:]
		if len(v.window) == silero.WindowSize {
			v.prob, _ = v.neural.Window(v.window) // cannot fail: a whole window
			v.window = v.window[:0]
		}
	}
}

// step advances the start/end state machine by one frame.
func (v *VAD) step(speech bool) VADEvent {
	if !v.inSpeech {
		if !speech {
			v.speechRun = 0
			return VADNone
		}
		v.speechRun++
		if v.speechRun < v.startFrames {
			return VADNone
		}
		v.inSpeech, v.speechRun, v.silenceRun = true, 0, 0
		return VADSpeechStart
	}
	if speech {
		v.silenceRun = 0
		return VADNone
	}
	v.silenceRun++
	if v.silenceRun < v.endFrames {
		return VADNone
	}
	v.inSpeech, v.silenceRun = false, 0
	return VADSpeechEnd
}

// SilenceFrames is how many non-speech frames have followed the last speech
// frame of the utterance in progress (0 outside speech).
func (v *VAD) SilenceFrames() int {
	if !v.inSpeech {
		return 0
	}
	return v.silenceRun
}

// EndSpeech ends the utterance in progress now, as if EndSilenceMs of
// silence had passed: the end-of-turn detector calls it when it is sure
// sooner. It reports whether there was an utterance to end.
func (v *VAD) EndSpeech() bool {
	if !v.inSpeech {
		return false
	}
	v.inSpeech, v.silenceRun = false, 0
	return true
}

// PreRoll appends to dst[:0] the audio from PreRollMs before speech start
// through the current frame, oldest first, and returns it. Call it right
// after Process returned VADSpeechStart; later it returns the most recent
// PreRollMs+StartMs of audio.
func (v *VAD) PreRoll(dst []int16) []int16 {
	dst = dst[:0]
	if v.ringFill < len(v.ring) {
		return append(dst, v.ring[:v.ringFill]...)
	}
	dst = append(dst, v.ring[v.ringNext:]...)
	return append(dst, v.ring[:v.ringNext]...)
}

// remember writes frame into the pre-roll ring.
func (v *VAD) remember(frame []int16) {
	if len(v.ring) == 0 {
		return
	}
	if len(frame) >= len(v.ring) {
		copy(v.ring, frame[len(frame)-len(v.ring):])
		v.ringNext, v.ringFill = 0, len(v.ring)
		return
	}
	n := copy(v.ring[v.ringNext:], frame)
	if n < len(frame) {
		copy(v.ring, frame[n:])
	}
	v.ringNext = (v.ringNext + len(frame)) % len(v.ring)
	v.ringFill = min(len(v.ring), v.ringFill+len(frame))
}

// energyDB returns the frame's mean power in dBFS after DC removal
// (-100 for silence).
func (v *VAD) energyDB(frame []int16) float64 {
	if len(frame) == 0 {
		return -100
	}
	x1, y1 := v.dcX, v.dcY
	var sum float64
	for _, s := range frame {
		x := float32(s)
		y := x - x1 + dcBlockPole*y1
		x1, y1 = x, y
		sum += float64(y * y)
	}
	v.dcX, v.dcY = x1, y1
	power := sum / float64(len(frame)) / (32768 * 32768)
	return 10 * math.Log10(power+1e-10)
}

// trackMinimum keeps the block minima and lifts the floor when even the
// quietest frame of the whole window is over the speech threshold.
func (v *VAD) trackMinimum(e float64) {
	v.blockMin = min(v.blockMin, e)
	v.blockCount++
	if v.blockCount < v.blockFrames {
		return
	}
	v.blockMins[v.blockCursor] = v.blockMin
	v.blockCursor = (v.blockCursor + 1) % vadMinWindowBlocks
	v.blockMin, v.blockCount = math.Inf(1), 0
	if v.blocksSeen < vadMinWindowBlocks {
		v.blocksSeen++
		return
	}
	windowMin := v.blockMins[0]
	for _, m := range v.blockMins[1:] {
		windowMin = min(windowMin, m)
	}
	if windowMin > v.floorDB+v.cfg.ThresholdDB-vadHysteresisDB {
		v.floorDB = windowMin
	}
}
