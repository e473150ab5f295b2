// Package tooleval scores a model's tool calls on spoken requests: whether
// "set a timer for twenty five minutes" calls set_timer with that duration,
// "turn the volume to thirty percent" the device's set_volume with 30, and
// whether ordinary questions ("what is the volume of a sphere") call nothing.
// Requests go through the model as the server sends them: the default
// system prompt, the tools a session offers (the built-in ones, and a
// xiaozhi device's), and optionally the knowledge stage's passages.
package tooleval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
)

// ErrCase is returned for a case file that cannot be read as cases.
var ErrCase = errors.New("tooleval: bad case")

// Case is one request and the call it should make (Want "" : none).
type Case struct {
	Text   string         `json:"text"`
	Device string         `json:"device"` // "builtin" (time and timers) or "xiaozhi" (also the device's tools)
	Want   string         `json:"want"`
	Args   map[string]any `json:"args"`
	// Seconds is set_timer's expected length; the duration is compared by
	// its meaning ("twenty five minutes" = "25 minutes"), not its words.
	Seconds *int   `json:"seconds"`
	Frame   string `json:"frame,omitempty"` // the sentence frame it came from, for the report
	file    string
}

// ReadCases reads a JSON-lines case file.
func ReadCases(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cs []Case
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var c Case
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrCase, path, n, err)
		}
		if c.Text == "" || (c.Device != "builtin" && c.Device != "xiaozhi") {
			return nil, fmt.Errorf("%w: %s:%d: want text and device builtin or xiaozhi", ErrCase, path, n)
		}
		c.file = path
		cs = append(cs, c)
	}
	return cs, sc.Err()
}

func schema(props string, required ...string) json.RawMessage {
	r, _ := json.Marshal(required)
	if len(required) == 0 {
		r = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(r) + `}`)
}

// Tools are the tools a session of the device kind offers, as the server
// lists them (names and arguments as issue 35 fixes them; descriptions are
// not shown to the demo model, whose tool line has names only).
func Tools(device string) []llm.Tool {
	ts := []llm.Tool{
		{Name: "get_time", Description: "The current date and time.", Parameters: schema("")},
		{Name: "set_timer", Description: "Start a timer that speaks when it ends.",
			Parameters: schema(`"duration":{"type":"string"},"label":{"type":"string"}`, "duration")},
		{Name: "cancel_timer", Description: "Cancel the running timer.", Parameters: schema("")},
	}
	if device == "xiaozhi" {
		ts = append(ts,
			llm.Tool{Name: "self_get_device_status", Description: "The device's status.", Parameters: schema("")},
			llm.Tool{Name: "self_audio_speaker_set_volume", Description: "Set the speaker volume.",
				Parameters: schema(`"volume":{"type":"integer","minimum":0,"maximum":100}`, "volume")},
			llm.Tool{Name: "adjust_volume", Description: "Turn the volume up or down by a step.",
				Parameters: schema(`"step":{"type":"integer"}`, "step")},
			llm.Tool{Name: "self_screen_set_brightness", Description: "Set the screen brightness.",
				Parameters: schema(`"brightness":{"type":"integer"}`, "brightness")},
		)
	}
	return ts
}

// Result of one case.
type Result struct {
	Case   Case
	Calls  []llm.ToolCall
	Text   string
	Right  bool
	Reason string // why not
	After  string // the spoken answer after a simulated result (right calls, Options.Round)
}

// Options of Run.
type Options struct {
	System    string // the system prompt ("" none)
	MaxTokens int    // per answer (default 64)
	Round     bool   // after a right call, send a result and record the spoken answer
}

// Run asks m every case, greedily, and scores the first answer's calls.
func Run(ctx context.Context, m llm.Model, cases []Case, o Options, progress io.Writer) ([]Result, error) {
	if o.MaxTokens <= 0 {
		o.MaxTokens = 64
	}
	var out []Result
	for _, c := range cases {
		var msgs []llm.Message
		if o.System != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: o.System})
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: c.Text})
		tools := Tools(c.Device)
		text, calls, err := ask(ctx, m, msgs, tools, o.MaxTokens)
		if err != nil && !errors.Is(err, errBadCall) {
			return out, fmt.Errorf("tooleval: %q: %w", c.Text, err)
		}
		r := Result{Case: c, Calls: calls, Text: text}
		if err != nil {
			r.Reason = err.Error()
		} else {
			r.Right, r.Reason = Score(c, calls)
		}
		if r.Right && o.Round && len(calls) > 0 {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls})
			for _, call := range calls {
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: fakeResult(call, c)})
			}
			after, more, err := ask(ctx, m, msgs, tools, o.MaxTokens)
			if err != nil && !errors.Is(err, errBadCall) {
				return out, fmt.Errorf("tooleval: %q, after the result: %w", c.Text, err)
			}
			r.After = after
			if len(more) > 0 {
				r.After += fmt.Sprintf(" [and called %s again]", more[0].Name)
			}
		}
		if progress != nil {
			mark := "ok  "
			if !r.Right {
				mark = "MISS"
			}
			fmt.Fprintf(progress, "%s %-8s %q -> %s%s\n", mark, c.Device, c.Text, describe(r), afterNote(r))
		}
		out = append(out, r)
	}
	return out, nil
}

var errBadCall = errors.New("unreadable call")

func ask(ctx context.Context, m llm.Model, msgs []llm.Message, tools []llm.Tool, maxTokens int) (string, []llm.ToolCall, error) {
	ch, err := m.Stream(ctx, llm.Request{Messages: msgs, Tools: tools, MaxTokens: maxTokens, Temperature: 0})
	if err != nil {
		return "", nil, err
	}
	var sb strings.Builder
	var calls []llm.ToolCall
	var terr error
	for t := range ch {
		sb.WriteString(t.Text)
		calls = append(calls, t.ToolCalls...)
		if t.Err != nil {
			terr = t.Err
		}
	}
	if terr != nil {
		// A model that wrote a call without a name: a wrong answer, not a failed run.
		if strings.Contains(terr.Error(), "tool call") {
			return sb.String(), calls, fmt.Errorf("%w: %w", errBadCall, terr)
		}
		return sb.String(), calls, terr
	}
	return strings.TrimSpace(sb.String()), calls, nil
}

func describe(r Result) string {
	if len(r.Calls) == 0 {
		return fmt.Sprintf("%q", r.Text) + reason(r)
	}
	parts := make([]string, len(r.Calls))
	for i, c := range r.Calls {
		parts[i] = c.Name + c.Arguments
	}
	return strings.Join(parts, " + ") + reason(r)
}

func reason(r Result) string {
	if r.Right {
		return ""
	}
	return " (" + r.Reason + ")"
}

func afterNote(r Result) string {
	if r.After == "" {
		return ""
	}
	return fmt.Sprintf(" => %q", r.After)
}

// Score says whether calls are the case's: no call for Want "", else one
// call of that tool with the expected arguments (a duration by its length,
// numbers by value; a label is not scored).
func Score(c Case, calls []llm.ToolCall) (bool, string) {
	if c.Want == "" {
		if len(calls) > 0 {
			return false, "called " + calls[0].Name
		}
		return true, ""
	}
	if len(calls) == 0 {
		return false, "no call"
	}
	call := calls[0]
	if call.Name != c.Want {
		return false, "called " + call.Name + ", want " + c.Want
	}
	if len(calls) > 1 {
		return false, fmt.Sprintf("%d calls", len(calls))
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return false, "arguments are not a JSON object"
	}
	switch c.Want {
	case "set_timer":
		d, _ := args["duration"].(string)
		got, ok := ParseDuration(d)
		if !ok {
			return false, fmt.Sprintf("duration %q does not parse", d)
		}
		want := 0
		if c.Seconds != nil {
			want = *c.Seconds
		} else if s, ok := c.Args["duration"].(string); ok {
			want, _ = ParseDuration(s)
		}
		if got != want {
			return false, fmt.Sprintf("duration %q is %d s, want %d s", d, got, want)
		}
	case "self_audio_speaker_set_volume", "adjust_volume":
		key := "volume"
		if c.Want == "adjust_volume" {
			key = "step"
		}
		g, ok := args[key].(float64)
		w, _ := c.Args[key].(float64)
		if !ok || g != w {
			return false, fmt.Sprintf("%s %v, want %v", key, args[key], c.Args[key])
		}
	}
	return true, ""
}

// fakeResult is what the tool would answer, for the spoken answer after it.
func fakeResult(call llm.ToolCall, c Case) string {
	switch call.Name {
	case "get_time":
		return "It is 9:14 PM on Monday, 7 December 2026."
	case "set_timer":
		var a struct{ Duration string }
		_ = json.Unmarshal([]byte(call.Arguments), &a)
		s, _ := ParseDuration(a.Duration)
		return "Timer set for " + Length(s) + "."
	case "cancel_timer":
		return "Cancelled the 25 minute timer."
	case "adjust_volume":
		return "Volume is now 60 percent."
	}
	return "true"
}

// Length writes seconds as the timer tool does: "1 hour 30 minutes".
func Length(s int) string {
	var parts []string
	for _, u := range []struct {
		n    int
		name string
	}{{s / 3600, "hour"}, {s % 3600 / 60, "minute"}, {s % 60, "second"}} {
		if u.n == 1 {
			parts = append(parts, "1 "+u.name)
		} else if u.n > 1 {
			parts = append(parts, strconv.Itoa(u.n)+" "+u.name+"s")
		}
	}
	return strings.Join(parts, " ")
}

var numberWords = map[string]int{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
	"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
	"seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "a": 1, "an": 1,
}

var unitSeconds = map[string]int{"second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}

// ParseDuration reads a spoken length — "twenty five minutes", "90
// seconds", "an hour and a half", "three and a half minutes", "two minutes
// and thirty seconds", "half an hour", "a quarter of an hour" — into
// seconds. It is the scorer's own reading: words it does not know fail it.
func ParseDuration(s string) (int, bool) {
	words := strings.Fields(strings.ToLower(strings.ReplaceAll(s, "-", " ")))
	total, last := 0, 0
	num, have, half, fromA := 0, false, false, false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "and" || w == "of" {
			continue
		}
		if w == "half" || w == "quarter" {
			div := map[string]int{"half": 2, "quarter": 4}[w]
			j := i + 1
			for j < len(words) && (words[j] == "of" || words[j] == "a" || words[j] == "an") {
				j++
			}
			switch {
			case j < len(words) && j > i+1 && unitSeconds[words[j]] > 0 && (!have || num == 1) && total == 0 && !half:
				total += unitSeconds[words[j]] / div // "half an hour", "a quarter of an hour"
				i, num, have = j, 0, false
			case have && w == "half" && words[i-1] == "a" && fromA && last > 0:
				total += last / 2 // "an hour and a half"
				num, have = 0, false
			case have && w == "half" && words[i-1] == "a" && !fromA:
				half = true // "three and a half minutes": the half goes with the unit after it
			default:
				return 0, false
			}
			continue
		}
		if u := unitSeconds[w]; u > 0 {
			if !have && !half {
				return 0, false
			}
			if have {
				total += num * u
			}
			fromA = false
			if half {
				total += u / 2
				half = false
			}
			last, num, have = u, 0, false
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil {
			v, ok := numberWords[w]
			if !ok && w != "hundred" {
				return 0, false
			}
			n = v
		}
		switch {
		case w == "hundred" && have && num == 1:
			num = 100
		case w == "hundred":
			return 0, false
		case have && num >= 20 && num%10 == 0 && n > 0 && n < 10 && err != nil:
			num += n // "twenty five"
		case have && half:
			return 0, false
		case have:
			// a number after a number: "three and a half" keeps three, the "a" starts the half
			if w == "a" || w == "an" {
				continue // "three and a half": the "a" belongs to the half
			}
			return 0, false
		default:
			num, have, fromA = n, true, w == "a" || w == "an"
		}
	}
	if have || half || total == 0 {
		return 0, false
	}
	return total, true
}

// Summary counts results by the kind of case.
type Summary struct {
	Tools, ToolsRight       int // cases that want a call
	Unlisted, UnlistedRight int // tool requests whose tool is not offered: no call wanted
	Ordinary, OrdinaryCalls int // ordinary questions, and how many called a tool
	ByWant                  map[string][2]int
}

// Summarise counts results.
func Summarise(rs []Result) Summary {
	s := Summary{ByWant: map[string][2]int{}}
	for _, r := range rs {
		k := r.Case.Want
		switch {
		case k != "":
			s.Tools++
			if r.Right {
				s.ToolsRight++
			}
		case r.Case.Frame != "" && !strings.HasPrefix(r.Case.Frame, "valid:") && isRequestFrame(r.Case):
			k = "(not listed)"
			s.Unlisted++
			if r.Right {
				s.UnlistedRight++
			}
		default:
			k = "(ordinary)"
			s.Ordinary++
			if !r.Right {
				s.OrdinaryCalls++
			}
		}
		v := s.ByWant[k]
		v[1]++
		if r.Right {
			v[0]++
		}
		s.ByWant[k] = v
	}
	return s
}

// isRequestFrame: a volume request asked of a device without volume tools.
func isRequestFrame(c Case) bool {
	return len(c.Args) > 0 || strings.Contains(c.Frame, "{") || c.Seconds != nil
}

// Write prints the summary.
func (s Summary) Write(w io.Writer) {
	pct := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return 100 * float64(a) / float64(b)
	}
	fmt.Fprintf(w, "tool requests: %d/%d right tool and arguments (%.1f%%)\n", s.ToolsRight, s.Tools, pct(s.ToolsRight, s.Tools))
	if s.Unlisted > 0 {
		fmt.Fprintf(w, "requests for a tool not offered: %d/%d answered without a call (%.1f%%)\n", s.UnlistedRight, s.Unlisted, pct(s.UnlistedRight, s.Unlisted))
	}
	fmt.Fprintf(w, "ordinary questions: %d/%d called a tool (%.1f%%)\n", s.OrdinaryCalls, s.Ordinary, pct(s.OrdinaryCalls, s.Ordinary))
	keys := make([]string, 0, len(s.ByWant))
	for k := range s.ByWant {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-32s %d/%d\n", k, s.ByWant[k][0], s.ByWant[k][1])
	}
}
