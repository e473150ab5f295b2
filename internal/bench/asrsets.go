package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Real recordings that Debian ships, read by `voxpipe bench asr-sets`
// (`make asr-sets`). Licences: pocketsphinx-testdata BSD-2-Clause (CMU);
// asterisk-core-sounds-en CC-BY-SA-3.0 (Allison Smith for Digium);
// alsa-utils GPL-2.
const (
	psTestData       = "/usr/share/pocketsphinx/test/data"
	asteriskSounds   = "/usr/share/asterisk/sounds/en_US_f_Allison"
	asteriskPrompts  = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
	alsaSounds       = "/usr/share/sounds/alsa"
	heldOutPrefix    = "heldout-"
	asteriskTuneMax  = 24 // prompts per tuning set: the bench must stay a few minutes
	asteriskHeldMax  = 12
	asteriskMinWords = 3 // one- and two-word prompts ("Added.") are not what people ask
)

// runBenchASRSets writes the sets: one folder per set, ID.wav + ID.txt each;
// folders named heldout-* are kept out of tuning.
func runBenchASRSets(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench asr-sets", flag.ContinueOnError)
	out := fs.String("out", "build/asrsets", "folder to write the sets into (replaced)")
	g722 := fs.String("g722dec", "build/g722dec", "G.722 decoder (cgo/g722dec, built by make asr-sets); \"\" skips the 16 kHz Asterisk sets")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	w := setWriter{root: *out, counts: map[string]int{}}
	if err := w.testdata(); err != nil {
		return err
	}
	if err := w.asterisk(*g722); err != nil {
		return err
	}
	if err := w.alsa(); err != nil {
		return err
	}
	names := make([]string, 0, len(w.counts))
	for n := range w.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(stdout, "%-24s %3d utterances\n", n, w.counts[n])
	}
	return nil
}

type setWriter struct {
	root   string
	counts map[string]int
}

func (w *setWriter) put(set, id string, pcm []int16, rate int, ref string) error {
	dir := filepath.Join(w.root, set)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := audio.EncodeWAV(&b, pcm, rate, 1); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, id+".wav"), b.Bytes(), 0o644); err != nil {
		return err
	}
	w.counts[set]++
	return os.WriteFile(filepath.Join(dir, id+".txt"), []byte(strings.Join(asrtest.Words(ref), " ")+"\n"), 0o644)
}

// testdata: goforward, cards and librivox (16 kHz). Librivox 0920/0930 and
// cards 004/005 are held out.
func (w *setWriter) testdata() error {
	if _, err := os.Stat(psTestData); err != nil {
		return fmt.Errorf("pocketsphinx-testdata missing (apt-get install pocketsphinx-testdata): %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(psTestData, "goforward.raw"))
	if err != nil {
		return err
	}
	pcm := make([]int16, len(raw)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	if err := w.put("testdata", "goforward", pcm, 16000, "go forward ten meters"); err != nil {
		return err
	}
	for _, s := range []struct{ dir, trans, heldFrom string }{
		{"cards", "cards/cards.transcription", "004"},
		{"librivox", "librivox/transcription", "sense_and_sensibility_01_austen_64kb-0920"},
	} {
		lines, err := readLines(filepath.Join(psTestData, s.trans))
		if err != nil {
			return err
		}
		for _, l := range lines {
			id, ref, ok := transcriptionLine(l)
			if !ok {
				continue
			}
			wav, err := readWAV(filepath.Join(psTestData, s.dir, id+".wav"))
			if err != nil {
				return err
			}
			set := "testdata"
			if id >= s.heldFrom {
				set = heldOutPrefix + "testdata"
			}
			if err := w.put(set, s.dir+"-"+id, wav.Mono(), wav.SampleRate, ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// asterisk: the Asterisk PBX prompts, one speaker. The same prompts twice:
// decoded from G.722 (16 kHz, wideband) and the 8 kHz WAV (telephone band).
// A third of the prompts (by a hash of the name) are held out.
func (w *setWriter) asterisk(g722 string) error {
	f, err := os.Open(asteriskPrompts)
	if err != nil {
		return fmt.Errorf("asterisk prompts missing (apt-get install asterisk-core-sounds-en asterisk-core-sounds-en-wav asterisk-core-sounds-en-g722): %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	type prompt struct {
		id, ref string
		hash    uint32
	}
	var tune, held []prompt
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		l := sc.Text()
		k := strings.Index(l, ": ")
		if k < 0 || strings.HasPrefix(l, ";") {
			continue
		}
		id, text := l[:k], l[k+2:]
		ref, ok := spellNumbers(text)
		if !ok || strings.ContainsAny(text, "[]") || len(asrtest.Words(ref)) < asteriskMinWords {
			continue
		}
		if _, err := os.Stat(filepath.Join(asteriskSounds, id+".wav")); err != nil {
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(id))
		p := prompt{id: id, ref: ref, hash: h.Sum32()}
		if p.hash%3 == 0 {
			held = append(held, p)
		} else {
			tune = append(tune, p)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, group := range []struct {
		prompts []prompt
		n       int
		prefix  string
	}{{tune, asteriskTuneMax, ""}, {held, asteriskHeldMax, heldOutPrefix}} {
		ps := group.prompts
		sort.Slice(ps, func(i, j int) bool { return ps[i].hash < ps[j].hash })
		ps = ps[:min(len(ps), group.n)]
		for _, p := range ps {
			name := strings.ReplaceAll(p.id, "/", "_")
			wav, err := readWAV(filepath.Join(asteriskSounds, p.id+".wav"))
			if err != nil {
				return err
			}
			if err := w.put(group.prefix+"asterisk-8k", name, wav.Mono(), wav.SampleRate, p.ref); err != nil {
				return err
			}
			if g722 == "" {
				continue
			}
			pcm, err := decodeG722(g722, filepath.Join(asteriskSounds, p.id+".g722"))
			if err != nil {
				return err
			}
			if err := w.put(group.prefix+"asterisk-16k", name, pcm, 16000, p.ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// alsa: alsa-utils' speaker-test voice ("Front Left", ...), 48 kHz.
func (w *setWriter) alsa() error {
	files, _ := filepath.Glob(filepath.Join(alsaSounds, "*_*.wav"))
	if len(files) == 0 {
		return fmt.Errorf("alsa-utils' sounds missing (apt-get install alsa-utils): no %s/*_*.wav", alsaSounds)
	}
	for _, f := range files {
		wav, err := readWAV(f)
		if err != nil {
			return err
		}
		id := strings.TrimSuffix(filepath.Base(f), ".wav")
		if err := w.put("alsa-48k", id, wav.Mono(), wav.SampleRate, strings.ReplaceAll(id, "_", " ")); err != nil {
			return err
		}
	}
	return nil
}

func decodeG722(tool, path string) ([]int16, error) {
	in, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	var out, stderr bytes.Buffer
	cmd := exec.Command(tool) //nolint:noctx // a local decoder over one short file; it ends with the command
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s < %s: %w: %s", tool, path, err, stderr.String())
	}
	b := out.Bytes()
	pcm := make([]int16, len(b)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return pcm, nil
}

func readWAV(path string) (*audio.WAV, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := audio.DecodeWAV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// transcriptionLine splits a sphinx transcription line "<s> words </s> (id)"
// into the id and the spoken words. The sentence markers are not speech:
// kept, Words turned each into a word "s", and every cards and librivox
// reference held two words nobody said (12 of the 452 tuning words and 8 of
// the 181 held-out ones before this, all counted as deletions).
func transcriptionLine(l string) (id, ref string, ok bool) {
	k := strings.LastIndex(l, "(")
	if k < 0 {
		return "", "", false
	}
	id = strings.TrimSuffix(strings.TrimSpace(l[k+1:]), ")")
	ref = strings.Join(strings.Fields(strings.NewReplacer("<s>", " ", "</s>", " ").Replace(l[:k])), " ")
	return id, ref, id != ""
}

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

var (
	ones = strings.Fields("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen")
	tens = strings.Fields("_ _ twenty thirty forty fifty sixty seventy eighty ninety")
)

// spellNumbers writes the numbers 0–99 in a prompt as words, as a speaker
// says them; ok is false for any other number (times, "911").
func spellNumbers(s string) (string, bool) {
	var b strings.Builder
	for _, w := range strings.Fields(s) {
		core := strings.TrimRight(w, ".,;:!?")
		n, err := strconv.Atoi(core)
		switch {
		case err == nil && n >= 0 && n < 20:
			w = ones[n]
		case err == nil && n >= 20 && n < 100:
			w = tens[n/10]
			if n%10 != 0 {
				w += " " + ones[n%10]
			}
		case strings.ContainsAny(core, "0123456789"):
			return "", false
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String(), true
}

var errNoSets = errors.New("no utterances found")
