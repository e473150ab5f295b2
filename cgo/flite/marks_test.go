package flite

import "testing"

func TestWordTimerLocatesTokens(t *testing.T) {
	text := `Say "hi", hi and HI again; 42 times.`
	timer := wordTimer{text: text}
	timer.startUtterance(1000, []token{
		{name: "Say", filePos: 0, end: 0.1},
		{name: "hi", filePos: 4, preLen: 1, end: 0.2},
		{name: "hi", filePos: -1, end: 0.3},   // no position: searched after the last one
		{name: "and", filePos: 99, end: 0.35}, // a wrong position is not trusted
		{name: "HI", filePos: 17, end: -1},    // never spoken: no mark
		{name: "again", filePos: 20, end: 0.4},
		{name: "forty-two", filePos: 27, end: 0.6}, // rewritten by flite: its position is used
		{name: "times", filePos: 30, end: 0.5},     // time going back is held level
	})
	got := timer.take(nil, 1e9, true)
	for i := 1; i < len(got); i++ {
		if got[i].TextEnd <= got[i-1].TextEnd || got[i].EndSample < got[i-1].EndSample {
			t.Fatalf("marks not ordered: %+v", got)
		}
	}
	var words []string
	prev := 0
	for _, m := range got {
		words = append(words, text[prev:m.TextEnd])
		prev = m.TextEnd
	}
	wantWords := []string{"Say", ` "hi`, `", hi`, " and", " HI again", "; 42", " times"}
	if len(words) != len(wantWords) {
		t.Fatalf("marked %q, want %q", words, wantWords)
	}
	for i := range words {
		if words[i] != wantWords[i] {
			t.Errorf("mark %d covers %q, want %q (all %q)", i, words[i], wantWords[i], words)
		}
	}
	if got[0].EndSample != 2600 || got[len(got)-1].EndSample != 1000+9600 || got[len(got)-2].EndSample != 1000+9600 {
		t.Errorf("end samples %+v", got)
	}
}

func TestWordTimerTakeByChunk(t *testing.T) {
	timer := wordTimer{text: "one two three"}
	timer.startUtterance(0, []token{
		{name: "one", filePos: 0, end: 0.1},
		{name: "two", filePos: 4, end: 0.2},
		{name: "three", filePos: 8, end: 0.5},
	})
	if got := timer.take(nil, 1600, false); len(got) != 1 || got[0].TextEnd != 3 {
		t.Fatalf("first chunk words %+v", got)
	}
	if got := timer.take(nil, 3000, false); len(got) != 0 {
		t.Fatalf("second chunk words %+v, want none", got)
	}
	// The utterance ends before flite's last segment time: clamp to it.
	got := timer.take(nil, 6000, true)
	if len(got) != 2 || got[0].EndSample != 3200 || got[1].EndSample != 6000 || got[1].TextEnd != 13 {
		t.Fatalf("last chunk words %+v", got)
	}
	// The next utterance continues after the clamped end.
	timer.startUtterance(6400, []token{{name: "one", filePos: 0, end: 0.1}})
	if got := timer.take(nil, 1e6, true); len(got) != 0 {
		t.Errorf("text already marked was marked again: %+v", got)
	}
}
