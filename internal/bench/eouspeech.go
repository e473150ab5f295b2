package bench

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/internal/questions"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	ttsespeak "github.com/voxpipe/voxpipe/tts/espeak"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// voxpipe bench eou-speech: what the end-of-turn scorer really reads. Each
// utterance of a text set is spoken (flite and espeak-ng voices at varied
// speeds and pitches, over room noise), paused once after a random word and
// streamed through the configured recogniser as the pipeline streams a
// person. It writes the recogniser's text at that pause (the partial, and
// the final the stream gives when it is closed there, as
// pipeline.turn.pause_final does), labelled cut off, and at the end (partial
// and final), labelled complete. The scorer is trained on text with made-up
// recognition errors; these rows carry the recogniser's own: a cut-off "what
// is the" heard as "what is that" reads complete as text, and only the
// recogniser's output shows how often that happens.

const benchEOUSpeechUsage = `usage: voxpipe bench eou-speech --in TEXTS --out ROWS.jsonl [flags]

TEXTS: one utterance per line, "source TAB text" (eou.py prepare's
eou-*.tsv.gz, gzip or plain) or bare text; "," and "|" mark where the
written text had a comma or a sentence end. Writes one JSON line per
recogniser text: {"utt","label":0|1,"kind","text","said","voice","source"}.
`

// The pause inserted after the cut word, and where in it the scorer reads
// the partial: the pipeline scores at the VAD's first silent frames, and
// pipeline.turn.min_silence_ms (160) is the earliest commit.
const (
	eouSpeechPauseMs = 400
	eouSpeechReadMs  = 160
)

// EOUSpeechRow is one recogniser text and what the speaker had said.
type EOUSpeechRow struct {
	Utt    int    `json:"utt"`   // the utterance's line among the texts spoken
	Label  int    `json:"label"` // 1 = the utterance ended there
	Kind   string `json:"kind"`  // pause-partial | pause-final | end-partial | end-final
	Text   string `json:"text"`  // what the recogniser gave
	Said   string `json:"said"`  // the words spoken so far and the markers after the last, "," or "|"
	Voice  string `json:"voice"`
	Source string `json:"source,omitempty"`
}

// SpeechVoices reports whether the voices bench eou-speech speaks with can
// be opened (an error where no TTS engine is built in).
func SpeechVoices() error {
	_, err := eouSpeechVoices()
	return err
}

// eouSpeechVoices opens every flite voice at three speeds and two of
// espeak-ng's English voices: many speakers, since the recogniser's errors
// depend on the voice, none the recogniser cannot follow at all (measured on
// held-out texts: flite 0.30-0.58 WER, these espeak-ng ones 0.62-0.72).
func eouSpeechVoices() ([]benchVoice, error) {
	var out []benchVoice
	for _, v := range []string{"slt", "kal16", "awb", "rms"} {
		for _, rate := range []float64{0.85, 1, 1.2} {
			s, err := ttsflite.New(ttsflite.Config{Voice: v, Rate: rate})
			if err != nil {
				continue
			}
			out = append(out, benchVoice{fmt.Sprintf("flite-%s-%.2f", v, rate), s})
		}
	}
	// espeak-ng's other English variants came out at 0.7-1.1 WER: noise, not speech.
	for i, v := range []string{"en-us", "en-us+f2"} {
		c := ttsespeak.DefaultConfig()
		c.Voice, c.Rate, c.Pitch = v, 150+i*25, 45+i*10
		s, err := ttsespeak.New(c)
		if err != nil {
			continue
		}
		out = append(out, benchVoice{fmt.Sprintf("espeak-%s-%d", v, c.Rate), s})
	}
	if len(out) == 0 {
		return nil, errors.New("bench eou-speech: no flite or espeak-ng voice could be opened")
	}
	return out, nil
}

// eouSpeechText is one input utterance: its source and its words with the
// "," and "|" markers as separate words.
type eouSpeechText struct {
	source string
	words  []string
}

func readEOUSpeechTexts(path string, limit int, rng *rand.Rand) ([]eouSpeechText, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench eou-speech: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("bench eou-speech: %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	var out []eouSpeechText
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		src, text, ok := strings.Cut(line, "\t")
		if !ok {
			src, text = "", src
		}
		words := strings.Fields(strings.NewReplacer(",", " , ", "|", " | ").Replace(strings.ToLower(text)))
		if len(words) > 0 && len(words) <= 40 && !benchText(strings.Join(words, " ")) {
			out = append(out, eouSpeechText{source: src, words: words})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench eou-speech: %s: %w", path, err)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// benchTexts are bench turns' utterances in recogniser form: kept out of
// the rows, so that the scorer trained on them is judged on speech it never
// heard.
var benchTexts = func() []string {
	var out []string
	for _, q := range append(append([]string(nil), questions.Complete...), questions.Short...) {
		out = append(out, endturn.Normalize(q))
	}
	for _, p := range benchPaused {
		out = append(out, endturn.Normalize(p[0]+" "+p[1]))
	}
	return out
}()

// benchText reports whether text (words and markers) is one of bench turns'
// utterances or holds one of three words or more.
func benchText(text string) bool {
	plain := endturn.Normalize(text)
	for _, b := range benchTexts {
		if plain == b || (strings.Count(b, " ") >= 2 && strings.Contains(" "+plain+" ", " "+b+" ")) {
			return true
		}
	}
	return false
}

func (w *Wiring) runBenchEOUSpeech(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench eou-speech", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchEOUSpeechUsage); fs.PrintDefaults() }
	cfgPath := fs.String("config", w.DefaultConfig, "YAML config (its asr section is used)")
	var sets multiFlag
	fs.Var(&sets, "set", "override a config key, key=value (repeatable)")
	in := fs.String("in", "", "utterances (source TAB text, or text; .gz read as gzip)")
	outPath := fs.String("out", "", "JSON lines written here")
	limit := fs.Int("limit", 0, "speak at most this many utterances (a seeded random choice); 0 = all")
	seed := fs.Uint64("seed", 1234, "seed of the choice, the voices, the cuts and the noise")
	parallel := fs.Int("parallel", 2, "utterances recognised at once")
	pauseFinal := fs.Float64("pause-final", 0.5, "share of utterances whose first part is also recognised alone and closed at the pause")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if *in == "" || *outPath == "" || *parallel < 1 {
		return fmt.Errorf("%w: bench eou-speech: give --in and --out (and --parallel >= 1)", errCommandLine)
	}
	cfg, err := w.LoadConfig(*cfgPath, "", sets)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(*seed, 1))
	texts, err := readEOUSpeechTexts(*in, *limit, rng)
	if err != nil {
		return err
	}
	voices, err := eouSpeechVoices()
	if err != nil {
		return err
	}
	mk, ok := w.ASRBackends[cfg.ASR.Backend]
	if !ok {
		return fmt.Errorf("bench eou-speech: unknown asr.backend %q", cfg.ASR.Backend)
	}
	rec, closer, err := mk(cfg)
	if err != nil {
		return err
	}
	defer closer.Close()
	out, err := os.Create(*outPath)
	if err != nil {
		return fmt.Errorf("bench eou-speech: %w", err)
	}
	defer out.Close()
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)

	// Rows go out in the utterances' order, whatever order they finish in,
	// so that the file does not depend on timing.
	var (
		mu       sync.Mutex
		done     int
		written  int
		failed   int
		writeErr error
		rowsOf   = make([][]EOUSpeechRow, len(texts))
		finished = make([]bool, len(texts))
		nextOut  int
		next     = make(chan int)
		wg       sync.WaitGroup
	)
	for range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// Each utterance has its own generator: the rows do not
				// depend on --parallel.
				r := rand.New(rand.NewPCG(*seed, uint64(i)+2))
				rows, err := speakEOUText(ctx, rec, texts[i], voices[r.IntN(len(voices))], r, r.Float64() < *pauseFinal)
				mu.Lock()
				done++
				if err != nil {
					failed++
					fmt.Fprintf(os.Stderr, "bench eou-speech: %q: %v\n", strings.Join(texts[i].words, " "), err)
				}
				rowsOf[i], finished[i] = rows, true
				for ; nextOut < len(texts) && finished[nextOut]; nextOut++ {
					for _, row := range rowsOf[nextOut] {
						row.Utt, row.Source = nextOut, texts[nextOut].source
						if err := enc.Encode(row); err != nil {
							writeErr = cmp.Or(writeErr, err)
							continue
						}
						written++
					}
					rowsOf[nextOut] = nil
				}
				if done%100 == 0 {
					fmt.Fprintf(os.Stderr, "bench eou-speech: %d of %d utterances, %d rows\n", done, len(texts), written)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range texts {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if err := cmp.Or(writeErr, bw.Flush()); err != nil {
		return fmt.Errorf("bench eou-speech: %w", err)
	}
	fmt.Fprintf(stdout, "bench eou-speech: %d utterances, %d rows, %d failed\n", done, written, failed)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > done/10 {
		return fmt.Errorf("bench eou-speech: %d of %d utterances failed", failed, done)
	}
	return nil
}

// speakEOUText speaks t with v, pauses after a random word and streams it
// through rec; with closeAtPause the first part is also recognised alone
// and closed at the pause.
func speakEOUText(ctx context.Context, rec asr.Recognizer, t eouSpeechText, v benchVoice, rng *rand.Rand, closeAtPause bool) ([]EOUSpeechRow, error) {
	// The written text: a "|" is a sentence end, a "," a comma.
	var b strings.Builder
	var said []string    // spoken words
	var ends []int       // each spoken word's end in b
	var saidAt []string  // the words up to each spoken word, with the markers that follow it
	var markAfter []bool // a comma or a sentence end follows the word: where people pause
	for i, w := range t.words {
		switch w {
		case ",", "|":
			if len(said) > 0 {
				if w == "|" {
					b.WriteByte('.')
				} else {
					b.WriteByte(',')
				}
				markAfter[len(markAfter)-1] = true
				saidAt[len(saidAt)-1] = strings.Join(t.words[:i+1], " ")
			}
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		said = append(said, w)
		ends = append(ends, b.Len())
		saidAt = append(saidAt, strings.Join(t.words[:i+1], " "))
		markAfter = append(markAfter, false)
	}
	if len(said) == 0 {
		return nil, errors.New("no words")
	}
	pcm, marks, err := synthesize(ctx, v.synth, b.String())
	if err != nil {
		return nil, err
	}
	// Each spoken word's end sample, from the first mark that reaches it.
	wordEnd := make([]int, len(said))
	m := 0
	for i, e := range ends {
		for m < len(marks) && marks[m].TextEnd < e {
			m++
		}
		if m == len(marks) {
			return nil, fmt.Errorf("no word mark for %q", said[i])
		}
		wordEnd[i] = marks[m].EndSample
	}
	if rate := v.synth.SampleRate(); rate != benchRate {
		if pcm, err = to16k(pcm, rate); err != nil {
			return nil, err
		}
		for i := range wordEnd {
			wordEnd[i] = int(int64(wordEnd[i]) * benchRate / int64(rate))
		}
	}
	start, end := audio.FirstAudible(pcm, benchRate), audio.AudibleEnd(pcm, benchRate)
	if start < 0 || end <= start {
		return nil, errors.New("no audible speech")
	}
	noiseRMS := []float64{quietRoomRMS, 30, 80}[rng.IntN(3)]
	speech := make([]int16, end-start)
	for i := range speech {
		s := float64(pcm[start+i]) + rng.NormFloat64()*noiseRMS
		speech[i] = int16(max(-32768, min(32767, s)))
	}
	// The cut: after a word before the last, more often at a comma or a
	// sentence end (where people pause), never where the audio has no room
	// on either side.
	cut, cutSample := -1, 0
	if len(said) > 1 {
		var marked []int
		for i := range len(said) - 1 {
			if markAfter[i] {
				marked = append(marked, i)
			}
		}
		if len(marked) > 0 && rng.Float64() < 0.4 {
			cut = marked[rng.IntN(len(marked))]
		} else {
			cut = rng.IntN(len(said) - 1)
		}
		cutSample = wordEnd[cut] - start
		if cutSample <= benchRate/10 || cutSample >= len(speech)-benchRate/10 {
			cut = -1
		}
	}
	pause := func(ms int) []int16 { return roomNoise(ms, noiseRMS, rng) }

	var rows []EOUSpeechRow
	row := func(label int, kind, text, saidText string) {
		if text = strings.TrimSpace(text); text != "" {
			rows = append(rows, EOUSpeechRow{Label: label, Kind: kind, Text: text, Said: saidText, Voice: v.name})
		}
	}
	whole := strings.Join(t.words, " ")
	// The whole utterance with the pause: the partial early in the pause
	// and after the end, then the final.
	var parts [][]int16
	var marksAt []int // sample offsets (in the streamed audio) to read the partial at
	if cut >= 0 {
		parts = [][]int16{speech[:cutSample], pause(eouSpeechPauseMs), speech[cutSample:], pause(eouSpeechPauseMs)}
		marksAt = []int{cutSample + eouSpeechReadMs*benchRate/1000, len(speech) + (eouSpeechPauseMs+eouSpeechReadMs)*benchRate/1000}
	} else {
		parts = [][]int16{speech, pause(eouSpeechPauseMs)}
		marksAt = []int{len(speech) + eouSpeechReadMs*benchRate/1000}
	}
	partials, final, err := recogniseParts(ctx, rec, parts, marksAt)
	if err != nil {
		return nil, err
	}
	if cut >= 0 {
		row(0, "pause-partial", partials[0], saidAt[cut])
	}
	row(1, "end-partial", partials[len(partials)-1], whole)
	row(1, "end-final", final, whole)
	if cut >= 0 && closeAtPause {
		_, final, err := recogniseParts(ctx, rec, [][]int16{speech[:cutSample], pause(eouSpeechReadMs)}, nil)
		if err != nil {
			return rows, err
		}
		row(0, "pause-final", final, saidAt[cut])
	}
	return rows, nil
}

// recogniseParts streams parts through one recogniser session in 20 ms
// frames and returns the partial standing when each offset of at was
// reached, and the final.
func recogniseParts(ctx context.Context, rec asr.Recognizer, parts [][]int16, at []int) ([]string, string, error) {
	if s, ok := rec.(asr.Sessioner); ok {
		sess := s.NewSession(asr.SessionOptions{InputRate: benchRate})
		defer sess.Close()
		rec = sess
	}
	st, err := rec.Start(ctx, benchRate)
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	var all []int16
	for _, p := range parts {
		all = append(all, p...)
	}
	partial := ""
	drain := func() {
		for {
			select {
			case r, ok := <-st.Results():
				if !ok || r.Final {
					return
				}
				partial = r.Text
			default:
				return
			}
		}
	}
	const frame = benchRate * 20 / 1000
	var partials []string
	for off := 0; off < len(all); off += frame {
		if err := st.Write(all[off:min(off+frame, len(all))]); err != nil {
			return nil, "", err
		}
		drain()
		for len(partials) < len(at) && off+frame >= at[len(partials)] {
			partials = append(partials, partial)
		}
	}
	for len(partials) < len(at) {
		partials = append(partials, partial)
	}
	if err := st.Close(); err != nil {
		return nil, "", err
	}
	final := ""
	for r := range st.Results() {
		if r.Final {
			final = r.Text
		}
	}
	return partials, final, nil
}
