package ttstest

import (
	"slices"
	"testing"

	"github.com/voxpipe/voxpipe/tts"
)

// A hand-built result whose marks are all valid passes CheckMarks, and
// MarkedWords gives back the marked words.
func TestCheckMarksAcceptsValidMarks(t *testing.T) {
	const text = "Hi, there 12 — 你好."
	r := Result{Chunks: []tts.Chunk{
		{PCM: make([]int16, 100), Words: []tts.WordMark{{TextEnd: 2, EndSample: 80}}},
		{PCM: make([]int16, 100), Words: []tts.WordMark{{TextEnd: 9, EndSample: 150}, {TextEnd: 12, EndSample: 190}}},
		{PCM: make([]int16, 100), Words: []tts.WordMark{{TextEnd: 20, EndSample: 250}, {TextEnd: 23, EndSample: 300}}},
	}}
	marks := CheckMarks(t, text, r)
	if len(marks) != 5 {
		t.Fatalf("CheckMarks returned %d marks, want 5", len(marks))
	}
	want := []string{"Hi", "there", "12", "你", "好"}
	if got := MarkedWords(text, marks); !slices.Equal(got, want) {
		t.Errorf("MarkedWords = %q, want %q", got, want)
	}
}
