package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The texts spoken: markers kept as words, bench turns' own utterances left
// out (the scorer is judged on them), empty and comment lines skipped.
func TestReadEOUSpeechTexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.tsv")
	in := "# comment\nuser\tif it rains, should i go | thanks\n\neveryday\twhat time is it\n" +
		"short\tstop\nuser\tso what is the capital of france then\nbare text without a source\n"
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	texts, err := readEOUSpeechTexts(path, 0, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range texts {
		got[strings.Join(x.words, " ")] = x.source
	}
	want := map[string]string{"if it rains , should i go | thanks": "user", "bare text without a source": ""}
	if len(got) != len(want) {
		t.Fatalf("texts %q, want %q", got, want)
	}
	for k, v := range want {
		if s, ok := got[k]; !ok || s != v {
			t.Errorf("%q: source %q (present %v), want %q", k, s, ok, v)
		}
	}
	if _, err := readEOUSpeechTexts(filepath.Join(t.TempDir(), "missing.tsv"), 0, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("a missing file gave no error")
	}
}

// bench eou-speech through flite and pocketsphinx: every utterance gives an
// end (partial and final, label 1) and, when cut, a pause row (label 0)
// whose words said are a proper prefix of the utterance's; most words said
// come back.
func TestBenchEOUSpeech(t *testing.T) {
	requireSphinx(t)
	if _, err := eouSpeechVoices(); err != nil {
		t.Skipf("no TTS voice: %v", err)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.tsv"), filepath.Join(dir, "rows.jsonl")
	texts := []string{"turn on the kitchen lights please", "how many days are there in a year", "tell me a story about a dragon"}
	if err := os.WriteFile(in, []byte("user\t"+strings.Join(texts, "\nuser\t")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", "..")) // the config's model paths are the repository's
	var stdout bytes.Buffer
	args := []string{"--in", in, "--out", out, "--pause-final", "1", "--set", "asr.sphinx.pool_size=1"}
	if err := runBenchEOUSpeech(context.Background(), args, &stdout); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byUtt := map[int][]eouSpeechRow{}
	lastUtt := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r eouSpeechRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if r.Utt < lastUtt {
			t.Errorf("utterance %d's row after utterance %d's: the rows must be in the texts' order", r.Utt, lastUtt)
		}
		lastUtt = r.Utt
		byUtt[r.Utt] = append(byUtt[r.Utt], r)
	}
	if len(byUtt) != len(texts) {
		t.Fatalf("rows of %d utterances, want %d", len(byUtt), len(texts))
	}
	saidWords, heardWords := 0, 0
	var finals []string
	for _, rows := range byUtt {
		kinds := map[string]eouSpeechRow{}
		for _, r := range rows {
			kinds[r.Kind] = r
			if r.Source != "user" || r.Voice == "" || r.Text == "" {
				t.Errorf("row %+v: want source user, a voice and a text", r)
			}
		}
		end, ok := kinds["end-final"]
		if !ok || end.Label != 1 || kinds["end-partial"].Label != 1 {
			t.Fatalf("rows %+v: want end rows labelled 1", rows)
		}
		if p, ok := kinds["pause-partial"]; ok {
			if p.Label != 0 || !strings.HasPrefix(end.Said, p.Said+" ") {
				t.Errorf("pause row %+v of %q: want label 0 and a proper prefix of what was said", p, end.Said)
			}
			if pf, ok := kinds["pause-final"]; ok && (pf.Label != 0 || pf.Said != p.Said) {
				t.Errorf("pause final %+v: want label 0 and said %q", pf, p.Said)
			}
		}
		heard := map[string]bool{}
		for _, w := range strings.Fields(end.Text) {
			heard[w] = true
		}
		for _, w := range strings.Fields(end.Said) {
			saidWords++
			if heard[w] {
				heardWords++
			}
		}
		finals = append(finals, end.Voice+": "+end.Text)
	}
	// The voices differ (awb at 0.85 speed is the recogniser's hardest),
	// but audio that reached it whole is mostly recognised.
	if 2*heardWords < saidWords {
		t.Errorf("%d of %d words said came back: %q", heardWords, saidWords, finals)
	}
	if !strings.Contains(stdout.String(), "3 utterances") {
		t.Errorf("summary %q", stdout.String())
	}
	if err := runBenchEOUSpeech(context.Background(), []string{"--in", in}, &stdout); err == nil {
		t.Error("no --out accepted")
	}
}
