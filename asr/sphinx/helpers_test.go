package sphinx

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/asr/asrtest"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// testData is pocketsphinx-testdata's directory.
const testData = "/usr/share/pocketsphinx/test/data"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { closeShared() }))
}

// utterance is one recording with its reference transcript.
type utterance struct {
	name string
	ref  string
	pcm  []int16 // 16 kHz mono
}

// Shared recognisers: loading the full LM costs 0.3–0.5 s per decoder, so
// tests reuse one per search mode.
var (
	sharedMu   sync.Mutex
	sharedRecs = map[bool]*Recognizer{}
)

func requireModel(t testing.TB) {
	t.Helper()
	if !haveCgo {
		t.Skip("requires cgo: pocketsphinx unavailable in a CGO_ENABLED=0 build")
	}
	if err := DefaultConfig().validate(); err != nil {
		t.Skipf("requires the en-us model: %v", err)
	}
}

func requireTestData(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(testData, "goforward.raw")); err != nil {
		t.Skipf("requires pocketsphinx-testdata (apt-get install pocketsphinx-testdata): %s not found", testData)
	}
}

// sharedRecognizer returns the default config's recogniser with
// FirstPassOnly set as given.
func sharedRecognizer(t testing.TB, firstPass bool) *Recognizer {
	t.Helper()
	requireModel(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if r := sharedRecs[firstPass]; r != nil {
		return r
	}
	cfg := DefaultConfig()
	cfg.FirstPassOnly = firstPass
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sharedRecs[firstPass] = r
	return r
}

func closeShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for k, r := range sharedRecs {
		_ = r.Close()
		delete(sharedRecs, k)
	}
}

func configName(firstPass bool) string {
	if firstPass {
		return "first-pass"
	}
	return "3-pass"
}

func readRaw(t testing.TB, path string) []int16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pcm := make([]int16, len(b)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return pcm
}

// readWAV16k reads a 16 kHz mono PCM16 WAV file (the testdata format).
func readWAV16k(t testing.TB, path string) []int16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		t.Fatalf("%s: not a RIFF/WAVE file", path)
	}
	var pcm []int16
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:]))
		body := b[off+8 : min(off+8+size, len(b))]
		switch id {
		case "fmt ":
			format, channels := binary.LittleEndian.Uint16(body), binary.LittleEndian.Uint16(body[2:])
			rate, bits := binary.LittleEndian.Uint32(body[4:]), binary.LittleEndian.Uint16(body[14:])
			if format != 1 || channels != 1 || rate != SampleRate || bits != 16 {
				t.Fatalf("%s: format %d, %d channels, %d Hz, %d bits; want PCM16 mono 16 kHz", path, format, channels, rate, bits)
			}
		case "data":
			pcm = make([]int16, len(body)/2)
			for i := range pcm {
				pcm[i] = int16(binary.LittleEndian.Uint16(body[2*i:]))
			}
			return pcm
		}
		off += 8 + size + size%2
	}
	t.Fatalf("%s: no data chunk", path)
	return nil
}

// loadSet reads a pocketsphinx-testdata set: "goforward", "cards" or
// "librivox".
func loadSet(t testing.TB, set string) []utterance {
	t.Helper()
	requireTestData(t)
	switch set {
	case "goforward":
		return []utterance{{"goforward", "go forward ten meters", readRaw(t, filepath.Join(testData, "goforward.raw"))}}
	case "cards":
		return loadTranscribed(t, filepath.Join(testData, "cards"), "cards.transcription")
	case "librivox":
		return loadTranscribed(t, filepath.Join(testData, "librivox"), "transcription")
	}
	t.Fatalf("unknown set %q", set)
	return nil
}

// loadTranscribed reads lines "<s> words </s> (fileid)" and fileid.wav.
func loadTranscribed(t testing.TB, dir, transcription string) []utterance {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, transcription))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var utts []utterance
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		open := strings.LastIndexByte(line, '(')
		if line == "" || open < 0 {
			continue
		}
		id := strings.TrimSuffix(line[open+1:], ")")
		ref := strings.NewReplacer("<s>", "", "</s>", "").Replace(line[:open])
		utts = append(utts, utterance{id, strings.Join(strings.Fields(ref), " "), readWAV16k(t, filepath.Join(dir, id+".wav"))})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return utts
}

// decodeResult is what one streamed utterance produced.
type decodeResult struct {
	final    string
	partials []string
	finalLat time.Duration // Close (ps_end_utt + final hypothesis) wall time
	decode   time.Duration // all Write and Close time
	// The same on the thread's CPU clock: unaffected by other processes
	// competing for the cores, so comparable across busy and idle runs.
	finalCPU  time.Duration
	decodeCPU time.Duration
}

// threadCPU is the calling thread's CPU time; the caller must hold
// runtime.LockOSThread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// decode streams pcm through a new stream in 20 ms frames, draining Results
// between writes as the pipeline does.
func decode(ctx context.Context, r asr.Recognizer, pcm []int16) (decodeResult, error) {
	var res decodeResult
	// Pin to one thread so that its CPU clock measures this stream's work.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st, err := r.Start(ctx, SampleRate)
	if err != nil {
		return res, err
	}
	defer st.Close()
	drain := func() {
		for {
			select {
			case p, ok := <-st.Results():
				if !ok || p.Final {
					return
				}
				res.partials = append(res.partials, p.Text)
			default:
				return
			}
		}
	}
	const frame = SampleRate / 50
	began, beganCPU := time.Now(), threadCPU()
	for off := 0; off < len(pcm); off += frame {
		if err := st.Write(pcm[off:min(off+frame, len(pcm))]); err != nil {
			return res, err
		}
		drain()
	}
	closing, closingCPU := time.Now(), threadCPU()
	if err := st.Close(); err != nil {
		return res, err
	}
	res.finalLat, res.finalCPU = time.Since(closing), threadCPU()-closingCPU
	res.decode, res.decodeCPU = time.Since(began), threadCPU()-beganCPU
	var final *asr.Result
	for r := range st.Results() {
		if r.Final {
			final = &r
		} else {
			res.partials = append(res.partials, r.Text)
		}
	}
	if final == nil {
		return res, errors.New("no final result")
	}
	res.final = final.Text
	return res, nil
}

// werOver decodes every utterance and returns total errors / words.
func werOver(t testing.TB, r asr.Recognizer, utts []utterance) (errs, words int, log []string) {
	t.Helper()
	for _, u := range utts {
		res, err := decode(context.Background(), r, u.pcm)
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		e, w := asrtest.WER(asrtest.Words(u.ref), asrtest.Words(res.final))
		errs += e
		words += w
		log = append(log, fmt.Sprintf("%s: %d/%d ref %q hyp %q", u.name, e, w, u.ref, res.final))
	}
	return errs, words, log
}

func werWords(ref, hyp string) (errs, words int) {
	return asrtest.WER(asrtest.Words(ref), asrtest.Words(hyp))
}
