package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/voxpipe/voxpipe/internal/questions"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
	"github.com/voxpipe/voxpipe/tts"
	ttsespeak "github.com/voxpipe/voxpipe/tts/espeak"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// The audio of voxpipe bench rooms, made at run time and never written to
// disk: real recordings (pocketsphinx-testdata) and the noises of rooms.

// roomUtt is one real recording with its transcript.
type roomUtt struct {
	name, ref string
	pcm       []int16 // 16 kHz, as recorded
	onset     int     // first sample of speech
	end       int     // one past the last sample of speech (audio.RecordingSpeechEnd)
	quietRMS  float64 // the recording's room at its quietest, as a sample RMS
}

// roomSpeech reads goforward.raw and the cards and librivox recordings.
func roomSpeech() ([]roomUtt, error) {
	if _, err := os.Stat(psTestData); err != nil {
		return nil, fmt.Errorf("bench rooms: pocketsphinx-testdata missing (apt-get install pocketsphinx-testdata): %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(psTestData, "goforward.raw"))
	if err != nil {
		return nil, err
	}
	pcm := make([]int16, len(raw)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	var out []roomUtt
	add := func(name, ref string, pcm []int16) {
		onset := speechOnset(pcm)
		end, quiet := audio.RecordingSpeechEnd(pcm, benchRate)
		if end > onset && onset >= 0 {
			room := max(quietRoomRMS, 32768*math.Pow(10, quiet/20))
			out = append(out, roomUtt{name: name, ref: ref, pcm: pcm, onset: onset, end: end, quietRMS: room})
		}
	}
	add("goforward", "go forward ten meters", pcm)
	for _, s := range []struct{ dir, trans string }{
		{"cards", "cards/cards.transcription"},
		{"librivox", "librivox/transcription"},
	} {
		lines, err := readLines(filepath.Join(psTestData, s.trans))
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			id, ref, ok := transcriptionLine(l)
			if !ok {
				continue
			}
			f, err := os.Open(filepath.Join(psTestData, s.dir, id+".wav"))
			if err != nil {
				continue // the transcription lists more than the package ships
			}
			w, err := audio.DecodeWAV(f)
			f.Close()
			if err != nil || w.SampleRate != benchRate {
				return nil, fmt.Errorf("bench rooms: %s/%s.wav: %w (want 16 kHz PCM16)", s.dir, id, err)
			}
			add(s.dir+"-"+id, ref, w.Mono())
		}
	}
	return out, nil
}

// speechOnset returns the first sample of the first 20 ms frame that is
// 15 dB over the recording's quiet (its 10th-percentile frame) and starts
// 60 ms of such frames: where a person would say the speech begins.
func speechOnset(pcm []int16) int {
	const frame = benchRate / 50
	var db []float64
	for off := 0; off+frame <= len(pcm); off += frame {
		var e float64
		for _, s := range pcm[off : off+frame] {
			e += float64(s) * float64(s)
		}
		db = append(db, 10*math.Log10(e/frame+1))
	}
	if len(db) == 0 {
		return -1
	}
	sorted := append([]float64(nil), db...)
	sort.Float64s(sorted)
	quiet := sorted[len(sorted)/10]
	for i := 0; i+3 <= len(db); i++ {
		if db[i] > quiet+15 && db[i+1] > quiet+15 && db[i+2] > quiet+15 {
			return i * frame
		}
	}
	return -1
}

// Noise names: the kinds of room bench rooms mixes under speech.
const (
	noisePink   = "pink"   // stationary hiss (a fan, an air conditioner)
	noiseBrown  = "brown"  // rumble (traffic, a car)
	noiseBabble = "babble" // ten talkers at once (a café)
	noiseMusic  = "music"  // synthesized piano-like music
	noiseTV     = "tv"     // one other talker with music under it
)

var allNoises = []string{noisePink, noiseBrown, noiseBabble, noiseMusic, noiseTV}

// makeNoises returns seconds of each named noise at unit RMS. Babble and
// the television are speech synthesized by flite and espeak-ng voices that
// the recordings are not spoken in.
func makeNoises(ctx context.Context, names []string, seconds int, seed uint64) (map[string][]float64, error) {
	n := seconds * benchRate
	out := map[string][]float64{}
	for _, name := range names {
		rng := rand.New(rand.NewPCG(seed, uint64(len(name))))
		switch name {
		case noisePink:
			out[name] = audiotest.Pink(n, rng)
		case noiseBrown:
			out[name] = audiotest.Brown(n, rng)
		case noiseMusic:
			out[name] = audiotest.Music(n, benchRate, rng)
		case noiseBabble, noiseTV:
			talkers := 10
			if name == noiseTV {
				talkers = 1
			}
			mix, err := talk(ctx, talkers, n, rng)
			if err != nil {
				return nil, err
			}
			if name == noiseTV { // a programme's music bed, 12 dB under the voice
				music := audiotest.Music(n, benchRate, rng)
				for i := range mix {
					mix[i] += music[i] * math.Pow(10, -12.0/20)
				}
			}
			out[name] = unitRMS(mix)
		default:
			return nil, fmt.Errorf("%w: unknown noise %q (want %s)", errCommandLine, name, strings.Join(allNoises, ", "))
		}
	}
	return out, nil
}

// talk sums talkers voices, each reading the bench's questions one after
// another with 100-600 ms between them, each talker normalised to the same
// level, to n samples.
func talk(ctx context.Context, talkers, n int, rng *rand.Rand) ([]float64, error) {
	var synths []tts.Synthesizer
	for _, v := range []string{"awb", "rms", "slt", "kal16"} {
		if s, err := ttsflite.New(ttsflite.Config{Voice: v, Rate: 1}); err == nil {
			synths = append(synths, s)
		}
	}
	for _, v := range []string{"en-us+f3", "en+m3", "en-gb-x-rp"} {
		c := ttsespeak.DefaultConfig()
		c.Voice = v
		if s, err := ttsespeak.New(c); err == nil {
			synths = append(synths, s)
		}
	}
	defer func() {
		for _, s := range synths {
			if c, ok := s.(io.Closer); ok {
				_ = c.Close()
			}
		}
	}()
	if len(synths) == 0 {
		return nil, errors.New("bench rooms: no flite or espeak-ng voice for babble")
	}
	texts := append(append([]string{}, questions.Complete...), questions.Short...)
	mix := make([]float64, n)
	for k := range talkers {
		s := synths[k%len(synths)]
		voice := make([]float64, 0, n)
		for i := rng.IntN(len(texts)); len(voice) < n; i++ {
			pcm, err := speak(ctx, s, texts[i%len(texts)])
			if err != nil {
				return nil, err
			}
			for _, v := range pcm {
				voice = append(voice, float64(v))
			}
			voice = append(voice, make([]float64, benchRate*(100+rng.IntN(500))/1000)...)
		}
		voice = unitRMS(voice[:n])
		shift := rng.IntN(n)
		for i := range mix {
			mix[i] += voice[(i+shift)%n]
		}
	}
	return mix, nil
}

func unitRMS(x []float64) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	g := 1 / (math.Sqrt(s/float64(max(1, len(x)))) + 1e-12)
	for i := range x {
		x[i] *= g
	}
	return x
}

// roomLevel is the noise level (dBFS) that puts it snr under a speaker
// at the recordings' typical active level.
func roomLevel(snr float64) float64 { return typicalSpeechDBFS - snr }

// typicalSpeechDBFS is the active speech level (audiotest.SpeechLevel) of
// pocketsphinx-testdata's recordings, about -26 dBFS.
const typicalSpeechDBFS = -26.0
