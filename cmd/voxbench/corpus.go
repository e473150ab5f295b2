package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// question is one spoken question: mono PCM16 at rate, and what it says
// (empty when unknown, then its transcripts are not scored).
type question struct {
	name string
	pcm  []int16
	rate int
	ref  string
}

// builtinQuestions are spoken by flite at run time when no --wav or --dir
// is given: things the bundled demo assistant answers, short and long.
var builtinQuestions = []string{
	"What is your name?",
	"What can you do?",
	"What does the word harbor mean?",
	"Tell me a joke.",
	"What is a compiler?",
	"Do you send my voice to the cloud?",
	"What does the word meadow mean?",
	"Who made you?",
	"What is a database?",
	"Can you tell me what the weather is usually like in the mountains during the early spring season?",
	"What is an operating system?",
	"Are you a robot?",
}

// loadQuestions reads --wav files and --dir folders (every *.wav in it);
// a file F.wav's reference text is F.txt beside it when that exists.
func loadQuestions(wavs []string, dir string) ([]question, error) {
	files := append([]string(nil), wavs...)
	if dir != "" {
		found, err := filepath.Glob(filepath.Join(dir, "*.wav"))
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("--dir %s: no .wav files", dir)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	qs := make([]question, 0, len(files))
	for _, f := range files {
		q, err := readQuestion(f)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func readQuestion(path string) (question, error) {
	f, err := os.Open(path)
	if err != nil {
		return question{}, err
	}
	defer f.Close()
	w, err := audio.DecodeWAV(f)
	if err != nil {
		return question{}, fmt.Errorf("%s: %w", path, err)
	}
	q := question{name: filepath.Base(path), pcm: w.Mono(), rate: w.SampleRate}
	ref, err := os.ReadFile(strings.TrimSuffix(path, filepath.Ext(path)) + ".txt")
	switch {
	case err == nil:
		q.ref = strings.TrimSpace(string(ref))
	case !errors.Is(err, os.ErrNotExist):
		return question{}, err
	}
	return q, nil
}

// generateQuestions speaks texts with a flite voice (in process; nothing
// is written to disk).
func generateQuestions(ctx context.Context, voice string, texts []string) ([]question, error) {
	synth, err := ttsflite.New(ttsflite.Config{Voice: voice})
	if err != nil {
		return nil, fmt.Errorf("flite voice %q: %w", voice, err)
	}
	defer synth.Close()
	qs := make([]question, 0, len(texts))
	for i, text := range texts {
		pcm, err := speak(ctx, synth, text)
		if err != nil {
			return nil, fmt.Errorf("flite %q: %w", text, err)
		}
		qs = append(qs, question{name: fmt.Sprintf("flite-%s-%02d", voice, i+1), pcm: pcm, rate: synth.SampleRate(), ref: text})
	}
	return qs, nil
}

func speak(ctx context.Context, s tts.Synthesizer, text string) ([]int16, error) {
	out := make(chan tts.Chunk, 8)
	collected := make(chan []int16, 1)
	go func() {
		var pcm []int16
		for c := range out {
			pcm = append(pcm, c.PCM...)
		}
		collected <- pcm
	}()
	err := s.Synthesize(ctx, text, out)
	close(out)
	return <-collected, err
}
