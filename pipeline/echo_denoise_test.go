//go:build cgo

package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
)

// sphinxTestData is pocketsphinx-testdata's directory: real recordings
// with their transcripts.
const sphinxTestData = "/usr/share/pocketsphinx/test/data"

type recording struct {
	ref string
	pcm []int16
}

// readRecordings loads librivox (five read sentences), cards (a person
// reading card names) and goforward.
func readRecordings(b *testing.B) []recording {
	b.Helper()
	var recs []recording
	for _, set := range []struct{ dir, list string }{{"librivox", "transcription"}, {"cards", "cards.transcription"}} {
		f, err := os.Open(filepath.Join(sphinxTestData, set.dir, set.list))
		if err != nil {
			b.Skipf("requires pocketsphinx-testdata (apt-get install pocketsphinx-testdata): %v", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			open := strings.LastIndexByte(line, '(')
			if line == "" || open < 0 {
				continue
			}
			id := strings.TrimSuffix(line[open+1:], ")")
			ref := strings.NewReplacer("<s>", "", "</s>", "").Replace(line[:open])
			raw, err := os.ReadFile(filepath.Join(sphinxTestData, set.dir, id+".wav"))
			if err != nil || len(raw) < 44 {
				b.Fatalf("%s: %v", id, err)
			}
			pcm := make([]int16, (len(raw)-44)/2)
			for i := range pcm {
				pcm[i] = int16(binary.LittleEndian.Uint16(raw[44+2*i:]))
			}
			recs = append(recs, recording{strings.Join(strings.Fields(ref), " "), pcm})
		}
		f.Close()
	}
	return recs
}

// decodeAll streams pcm through r in 20 ms frames and returns the final.
func decodeAll(r asr.Recognizer, pcm []int16) (string, error) {
	st, err := r.Start(context.Background(), asrRate)
	if err != nil {
		return "", err
	}
	n := asrRate * frameMs / 1000
	var final string
	drain := func() {
		for {
			select {
			case res, ok := <-st.Results():
				if !ok {
					return
				}
				if res.Final {
					final = res.Text
				}
			default:
				return
			}
		}
	}
	for i := 0; i+n <= len(pcm); i += n {
		if err := st.Write(pcm[i : i+n]); err != nil {
			return "", err
		}
		drain()
	}
	if err := st.Close(); err != nil {
		return "", err
	}
	for res := range st.Results() {
		if res.Final {
			final = res.Text
		}
	}
	return final, nil
}

// BenchmarkDenoiseWER: pocketsphinx's word error rate on real recordings,
// clean and mixed with pink noise, music and brown noise, with and without
// the speexdsp noise suppressor in front (as Config.Denoise puts it):
//
//	go test ./pipeline -run XXX -bench DenoiseWER -benchtime 1x
func BenchmarkDenoiseWER(b *testing.B) {
	recs := readRecordings(b)
	rec, err := sphinx.New(sphinx.DefaultConfig())
	if err != nil {
		b.Skipf("pocketsphinx unavailable: %v", err)
	}
	defer rec.Close()
	type noise struct {
		name string
		make func(n int, rng *rand.Rand) []float64
		snr  float64
	}
	conds := []noise{{"clean", nil, 0}}
	for _, snr := range []float64{20, 10, 5} {
		conds = append(conds, noise{"pink", audiotest.Pink, snr},
			noise{"music", func(n int, rng *rand.Rand) []float64 { return audiotest.Music(n, asrRate, rng) }, snr})
	}
	conds = append(conds, noise{"brown", audiotest.Brown, 10})
	for _, c := range conds {
		// off, speexdsp's default (-15 dB) and a gentler -6 dB.
		for _, denoise := range []string{"off", "-15dB", "-6dB"} {
			name := c.name
			if c.make != nil {
				name = fmt.Sprintf("%s%.0fdB", c.name, c.snr)
			}
			b.Run(fmt.Sprintf("%s/denoise=%s", name, denoise), func(b *testing.B) {
				var errs, words int
				for b.Loop() {
					errs, words = 0, 0
					rng := rand.New(rand.NewPCG(11, 12))
					for _, r := range recs {
						// A second of the room before the words, as a
						// session hears it (the suppressor learns the noise
						// there).
						pcm := append(make([]int16, asrRate), r.pcm...)
						if c.make != nil {
							pcm = audiotest.Mix(pcm, c.make(len(pcm), rng), c.snr)
						}
						switch denoise {
						case "-15dB":
							pcm = denoised(b, pcm, 0)
						case "-6dB":
							pcm = denoised(b, pcm, -6)
						}
						hyp, err := decodeAll(rec, pcm)
						if err != nil {
							b.Fatal(err)
						}
						e, n := asrtest.WER(asrtest.Words(r.ref), asrtest.Words(hyp))
						errs, words = errs+e, words+n
					}
				}
				b.ReportMetric(100*float64(errs)/float64(words), "wer_pct")
				b.ReportMetric(float64(words), "words")
			})
		}
	}
}

// denoised runs pcm through a session's noise suppressor.
func denoised(b *testing.B, pcm []int16, maxDB int) []int16 {
	cfg := DefaultConfig()
	cfg.Denoise = DenoiseConfig{On: true, MaxDB: maxDB}
	cl, err := newMicCleaner(cfg, nil, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	n := asrRate * frameMs / 1000
	out := make([]int16, 0, len(pcm))
	for i := 0; i+n <= len(pcm); i += n {
		out = append(out, cl.clean(pcm[i:i+n], time.Time{})...)
	}
	return out
}
