package toolcall

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

func ix(i int) *int { return &i }

func TestSplitArgumentsCompleteAtClosingBrace(t *testing.T) {
	var a Assembler
	steps := []struct {
		d     Delta
		ready int
	}{
		{Delta{Index: ix(0), ID: "call_1", Type: "function", Name: "get_weather"}, 0},
		{Delta{Index: ix(0), Arguments: `{"ci`}, 0},
		{Delta{Index: ix(0), Arguments: `ty": "Par`}, 0},
		{Delta{Index: ix(0), Arguments: `is, {x}"`}, 0}, // a brace inside a string does not close it
		{Delta{Index: ix(0), Arguments: `}`}, 1},
	}
	for i, s := range steps {
		if err := a.Add(s.d); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := a.Ready()
		if len(got) != s.ready {
			t.Fatalf("step %d: ready %v, want %d", i, got, s.ready)
		}
		if s.ready == 1 && (got[0] != llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris, {x}"}`}) {
			t.Fatalf("call %+v", got[0])
		}
	}
	if rest, err := a.Finish(); err != nil || len(rest) != 0 {
		t.Fatalf("Finish after all handed out: %v, %v", rest, err)
	}
	// Trailing whitespace is fine; more text is not.
	if err := a.Add(Delta{Index: ix(0), Arguments: " \n"}); err != nil {
		t.Fatal(err)
	}
	err := a.Add(Delta{Index: ix(0), Arguments: `,"x":1}`})
	var te *Error
	if !errors.As(err, &te) || te.Index != 0 || !strings.Contains(err.Error(), "after a complete JSON object") {
		t.Fatalf("arguments after the object: %v", err)
	}
}

func TestInterleavedParallelCallsInIndexOrder(t *testing.T) {
	var a Assembler
	var got []llm.ToolCall
	for _, d := range []Delta{
		{Index: ix(0), ID: "a", Name: "set_timer", Arguments: `{"seconds":`},
		{Index: ix(1), ID: "b", Name: "get_time", Arguments: `{}`}, // complete, but waits for 0
		{Index: ix(2), ID: "c", Name: "set_volume"},
		{Index: ix(0), Arguments: `30}`},
		{Index: ix(2), Arguments: `{"percent":40`},
	} {
		if err := a.Add(d); err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Ready()...)
	}
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("ready %+v", got)
	}
	if !a.Pending() {
		t.Fatal("call 2 not pending")
	}
	rest, err := a.Finish()
	// The unfinished object is passed on as written: the caller's schema
	// check answers the model.
	if err != nil || len(rest) != 1 || rest[0] != (llm.ToolCall{ID: "c", Name: "set_volume", Arguments: `{"percent":40`}) {
		t.Fatalf("Finish %+v, %v", rest, err)
	}
}

func TestWithoutIndexOrIDAndEmptyArguments(t *testing.T) {
	var a Assembler
	for _, d := range []Delta{
		{ID: "x1", Name: "get_time"},             // no index: the first call
		{Name: "get_time", Arguments: "{"},       // repeated name, continues x1
		{Arguments: "}"},                         // continues x1
		{ID: "x2", Name: "cancel_timer"},         // a new id: the next call
		{Index: ix(5), Name: "no_id_no_args"},    // gets an id, "{}"
		{Index: ix(5), Name: "no_id_no_args"},    // a repeat, not "no_id_no_argsno_id_no_args"
		{Index: ix(5), Type: "function", ID: ""}, // nothing new
	} {
		if err := a.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	calls := a.Ready()
	rest, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	calls = append(calls, rest...)
	if len(calls) != 3 || calls[0] != (llm.ToolCall{ID: "x1", Name: "get_time", Arguments: "{}"}) ||
		calls[1] != (llm.ToolCall{ID: "x2", Name: "cancel_timer", Arguments: "{}"}) ||
		calls[2].Name != "no_id_no_args" || calls[2].Arguments != "{}" || !strings.HasPrefix(calls[2].ID, "call_") {
		t.Fatalf("calls %+v", calls)
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deltas []Delta
		want   string
	}{
		{"negative index", []Delta{{Index: ix(-1), Name: "f"}}, "index out of range"},
		{"id changes", []Delta{{Index: ix(0), ID: "a", Name: "f"}, {Index: ix(0), ID: "b"}}, `id changed from "a" to "b"`},
		{"other type", []Delta{{Index: ix(0), Type: "custom", Name: "f"}}, `type "custom" is not supported`},
		{"name after arguments", []Delta{{Index: ix(0), Name: "f", Arguments: `{"a`}, {Index: ix(0), Name: "g"}}, "after the arguments began"},
		{"huge arguments", []Delta{{Index: ix(0), Name: "f", Arguments: strings.Repeat("x", MaxArgumentBytes+1)}}, "arguments over"},
		{"call before handed ones", []Delta{{Index: ix(3), Name: "f", Arguments: "{}"}, {Index: ix(1), Name: "g"}}, "ordered before calls already handed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Assembler
			var err error
			for _, d := range tc.deltas {
				if err = a.Add(d); err != nil {
					break
				}
				a.Ready()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tool call ") {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	var a Assembler
	_ = a.Add(Delta{Index: ix(0), Arguments: "{}"})
	if _, err := a.Finish(); err == nil || !strings.Contains(err.Error(), "no function name") {
		t.Fatalf("a call without a name: %v", err)
	}
	var b Assembler
	for i := range MaxCalls {
		if err := b.Add(Delta{Index: ix(i), Name: "f"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(Delta{Index: ix(MaxCalls), Name: "f"}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("call %d: %v", MaxCalls+1, err)
	}
}

func TestCheckRequest(t *testing.T) {
	ok := llm.Request{Tools: []llm.Tool{{Name: "a"}, {Name: "b", Parameters: []byte(` {"type":"object"}`)}}, ToolChoice: llm.ToolChoiceRequired}
	if err := CheckRequest(ok); err != nil {
		t.Fatal(err)
	}
	if p, _ := Parameters(ok.Tools[0]); !reflect.DeepEqual(p, noParameters) {
		t.Fatalf("nil parameters sent as %s", p)
	}
	for _, tc := range []struct {
		req  llm.Request
		want string
	}{
		{llm.Request{ToolChoice: llm.ToolChoiceRequired}, "without tools"},
		{llm.Request{ToolChoice: "auto"}, "unknown tool choice"},
		{llm.Request{Tools: []llm.Tool{{Name: ""}}}, "without a name"},
		{llm.Request{Tools: []llm.Tool{{Name: "a"}, {Name: "a"}}}, "listed twice"},
		{llm.Request{Tools: []llm.Tool{{Name: "a", Parameters: []byte(`[1]`)}}}, "not a JSON object"},
		{llm.Request{Tools: []llm.Tool{{Name: "a", Parameters: []byte(`{"type":`)}}}, "not a JSON object"},
		{llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, ToolCallID: "zz"}}}, "unknown call id"},
	} {
		if err := CheckRequest(tc.req); !errors.Is(err, llm.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if !ValidName("set_volume-2") || ValidName("set volume") || ValidName(strings.Repeat("a", 65)) || ValidName("") {
		t.Fatal("ValidName")
	}
}

// FuzzAssembler: any sequence of deltas (a JSON array of them) is taken or
// refused with an Error; nothing panics, every call handed out has a name
// and an id, and each call begun is handed out exactly once.
func FuzzAssembler(f *testing.F) {
	f.Add(`[{"i":0,"id":"a","n":"f","a":"{\"x\":"},{"i":1,"id":"b","n":"g","a":"{}"},{"i":0,"a":"1}"}]`)
	f.Add(`[{"id":"a","n":"f"},{"a":"{"},{"id":"b","n":"g"},{"i":-1}]`)
	f.Fuzz(func(t *testing.T, script string) {
		var deltas []struct {
			I  *int   `json:"i"`
			ID string `json:"id"`
			T  string `json:"t"`
			N  string `json:"n"`
			A  string `json:"a"`
		}
		if json.Unmarshal([]byte(script), &deltas) != nil {
			return
		}
		var a Assembler
		check := func(calls []llm.ToolCall) {
			for _, c := range calls {
				if c.Name == "" || c.ID == "" || c.Arguments == "" {
					t.Fatalf("handed out %+v", c)
				}
			}
		}
		n := 0
		for _, d := range deltas {
			if err := a.Add(Delta{Index: d.I, ID: d.ID, Type: d.T, Name: d.N, Arguments: d.A}); err != nil {
				var te *Error
				if !errors.As(err, &te) {
					t.Fatalf("error %v is not an *Error", err)
				}
				return
			}
			r := a.Ready()
			n += len(r)
			check(r)
		}
		rest, err := a.Finish()
		n += len(rest)
		check(rest)
		// Each call begun is handed out exactly once.
		if err == nil && (a.Pending() || n != len(a.calls) || n > MaxCalls) {
			t.Fatalf("after Finish: pending %v, %d handed out of %d calls", a.Pending(), n, len(a.calls))
		}
	})
}
