package espeak

import (
	"testing"
)

// event is one espeak event as the tracker sees it.
type event struct {
	word            bool // word start, else clause end
	textPos, length int  // 1-based characters
	sample          int
}

func track(text string, events []event, total int) []WordMark {
	tr := newWordTracker(text)
	var marks []WordMark
	for _, e := range events {
		var m WordMark
		var ok bool
		if e.word {
			m, ok = tr.word(e.textPos, e.length, e.sample)
		} else {
			m, ok = tr.close(e.sample)
		}
		if ok {
			marks = append(marks, m)
		}
	}
	if m, ok := tr.close(total); ok {
		marks = append(marks, m)
	}
	return marks
}

func covered(text string, marks []WordMark) []string {
	var out []string
	prev := 0
	for _, m := range marks {
		out = append(out, text[prev:m.TextEnd])
		prev = m.TextEnd
	}
	return out
}

func TestWordTrackerMapsEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		events []event
		want   []string
	}{{
		// Positions as espeak-ng 1.51 reports them: the number is several
		// words pointing into the token, "for a" is one word.
		name: "numbers and joined words",
		text: `Hello, "world"! I have 1234 apples for a café.`,
		events: []event{
			{true, 1, 5, 0}, {false, 7, 0, 100}, {true, 9, 5, 200}, {false, 16, 0, 300},
			{true, 17, 1, 300}, {true, 19, 4, 400}, {true, 24, 4, 500}, {true, 25, 4, 600},
			{true, 25, 4, 700}, {true, 29, 6, 800}, {true, 36, 3, 900}, {true, 42, 4, 1000},
			{false, 46, 0, 1100},
		},
		want: []string{"Hello", `, "world`, `"! I`, " have", " 1234", " apples", " for a", " café"},
	}, {
		name:   "han characters",
		text:   "你好，世界。",
		events: []event{{true, 1, 1, 0}, {true, 2, 1, 10}, {false, 3, 0, 20}, {true, 4, 1, 20}, {true, 5, 1, 30}},
		want:   []string{"你", "好", "，世", "界"},
	}, {
		name:   "positions past the end are clamped",
		text:   "ok",
		events: []event{{true, 1, 9, 0}, {true, 7, 2, 5}},
		want:   []string{"ok"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			marks := track(tc.text, tc.events, 5000)
			got := covered(tc.text, marks)
			if len(got) != len(tc.want) {
				t.Fatalf("marks cover %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("mark %d covers %q, want %q", i, got[i], tc.want[i])
				}
			}
			for i := 1; i < len(marks); i++ {
				if marks[i].EndSample < marks[i-1].EndSample || marks[i].TextEnd <= marks[i-1].TextEnd {
					t.Errorf("marks out of order: %+v", marks)
				}
			}
		})
	}
}

func TestWordTrackerEndSamples(t *testing.T) {
	marks := track("one two three", []event{{true, 1, 3, 0}, {true, 5, 3, 100}, {false, 8, 0, 180}, {true, 9, 5, 200}}, 400)
	want := []WordMark{{TextEnd: 3, EndSample: 100}, {TextEnd: 7, EndSample: 180}, {TextEnd: 13, EndSample: 400}}
	if len(marks) != len(want) {
		t.Fatalf("marks %+v, want %+v", marks, want)
	}
	for i := range want {
		if marks[i] != want[i] {
			t.Errorf("mark %d = %+v, want %+v", i, marks[i], want[i])
		}
	}
}
