package pipeline

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
)

func testLogger() zerolog.Logger { return zerolog.Nop() }

func TestHeardText(t *testing.T) {
	answer := "Hello there. How are you?"
	words := []heardMark{{5, 100}, {11, 200}, {12, 210}, {16, 300}, {20, 400}, {24, 500}, {25, 510}}
	for _, tc := range []struct {
		played int
		want   string
	}{
		{0, ""}, {99, ""}, {100, "Hello"}, {205, "Hello there"}, {210, "Hello there."},
		{450, "Hello there. How are"}, {1000, answer},
	} {
		if got := heardText(answer, words, tc.played); got != tc.want {
			t.Errorf("played %d: have %q, want %q", tc.played, got, tc.want)
		}
	}
	// A mark inside a multi-byte character never splits it.
	if got := heardText("né", []heardMark{{2, 1}}, 5); got != "n" {
		t.Errorf("have %q, want %q", got, "n")
	}
}

func TestAlignChunk(t *testing.T) {
	answer := "**Sure!** Here is\na list:\n- first item"
	ends, next := alignChunk(answer, 0, "Sure!")
	if got := answer[:ends[len(ends)-1]]; got != "**Sure!" {
		t.Errorf("chunk 1 maps to %q", got)
	}
	ends, next = alignChunk(answer, next, "Here is a list:")
	if got := answer[:ends[len(ends)-1]]; got != "**Sure!** Here is\na list:" {
		t.Errorf("chunk 2 maps to %q", got)
	}
	ends, _ = alignChunk(answer, next, "first item")
	if ends[len(ends)-1] != len(answer) {
		t.Errorf("chunk 3 ends at %d, want %d", ends[len(ends)-1], len(answer))
	}
	// A chunk byte absent from the answer does not run away.
	ends, next = alignChunk("abc def", 0, "abc x def")
	if next != len("abc def") || ends[4] != 4 {
		t.Errorf("ends %v next %d", ends, next)
	}
}

func TestCapHistory(t *testing.T) {
	sys := llm.Message{Role: llm.RoleSystem, Content: "s"}
	u := func(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
	a := func(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }
	got := capHistory([]llm.Message{sys, u("1"), a("1"), u("2"), a("2"), u("3")}, 4)
	want := []llm.Message{sys, u("2"), a("2"), u("3")}
	checkHistory(t, got, want)
	got = capHistory([]llm.Message{u("1"), a("1"), u("2"), a("2"), u("3"), a("3")}, 3)
	checkHistory(t, got, []llm.Message{u("3"), a("3")})
	got = capHistory([]llm.Message{sys, u("1"), a("1"), u("2")}, 1) // treated as 2
	checkHistory(t, got, []llm.Message{sys, u("2")})
	call := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "get_time"}}}
	result := llm.Message{Role: llm.RoleTool, ToolCallID: "c", Content: "noon"}
	got = capHistory([]llm.Message{sys, u("1"), call, result, a("1"), u("2"), a("2"), u("3")}, 4)
	checkHistory(t, got, []llm.Message{sys, u("2"), a("2"), u("3")}) // the tool exchange goes whole
	got = capHistory([]llm.Message{sys, u("1"), a("1"), u("2"), call, result, a("2")}, 2)
	checkHistory(t, got, []llm.Message{sys, u("2"), call, result, a("2")}) // the latest exchange stays whole
	got = capHistory([]llm.Message{sys, u("1"), a("1")}, 0)
	checkHistory(t, got, []llm.Message{sys, u("1"), a("1")})
}

func TestTraceMethods(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := Trace{Marks: map[string]time.Time{
		MarkSpeechStart:   t0,
		MarkSpeechEnd:     t0.Add(time.Second),
		MarkFirstAudioOut: t0.Add(1250 * time.Millisecond),
	}}
	ms := tr.SinceSpeechEnd()
	if ms[MarkSpeechStart] != -1000 || ms[MarkSpeechEnd] != 0 || ms[MarkFirstAudioOut] != 250 {
		t.Errorf("SinceSpeechEnd = %v", ms)
	}
	if v, ok := tr.VoiceToVoice(); !ok || v != 250 {
		t.Errorf("VoiceToVoice = %v, %v; want 250, true", v, ok)
	}
	delete(tr.Marks, MarkFirstAudioOut)
	if _, ok := tr.VoiceToVoice(); ok {
		t.Errorf("VoiceToVoice ok without first_audio_out")
	}
	if (Trace{}).SinceSpeechEnd() != nil {
		t.Errorf("SinceSpeechEnd without speech_end is not nil")
	}
}

func TestSendQueue(t *testing.T) {
	var q sendQueue[int]
	ch := make(chan int, 3)
	if c, _ := q.next(ch); c != nil {
		t.Fatal("empty queue offers a channel")
	}
	q.push(1)
	q.push(2)
	for q.len() > 0 {
		c, v := q.next(ch)
		c <- v
		q.pop()
	}
	if <-ch != 1 || <-ch != 2 {
		t.Fatal("order lost")
	}
}

// FuzzAlignChunk: whatever the chunker hands over, the map back into the
// answer stays inside it and never runs backwards, and the heard prefix cut
// at any mapped offset is valid UTF-8.
func FuzzAlignChunk(f *testing.F) {
	f.Add("**Sure!** Here is\na list:\n- first item", 3, "Here is a list:")
	f.Add("héllo wörld", 0, "wörld")
	f.Add("abc", 2, "xyz")
	f.Fuzz(func(t *testing.T, answer string, from int, chunk string) {
		if from < 0 || from > len(answer) {
			return
		}
		ends, next := alignChunk(answer, from, chunk)
		if len(ends) != len(chunk)+1 || ends[0] != from || next != ends[len(ends)-1] {
			t.Fatalf("ends %v next %d for %d chunk bytes from %d", ends, next, len(chunk), from)
		}
		for i, e := range ends {
			if e < from || e > len(answer) || (i > 0 && e < ends[i-1]) {
				t.Fatalf("ends %v leave [%d, %d] or run backwards", ends, from, len(answer))
			}
			heard := heardText(answer, []heardMark{{textEnd: e, outEnd: 0}}, 0)
			if !utf8.ValidString(heard) && utf8.ValidString(answer) {
				t.Fatalf("heard %q is not valid UTF-8", heard)
			}
		}
	})
}
