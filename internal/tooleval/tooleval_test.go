package tooleval

import (
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]int{
		"twenty five minutes": 1500, "90 seconds": 90, "an hour and a half": 5400, "a minute and a half": 90,
		"three and a half minutes": 210, "two minutes and thirty seconds": 150, "1 hour 30 minutes": 5400,
		"half an hour": 1800, "a quarter of an hour": 900, "quarter of an hour": 900, "one hundred seconds": 100,
		"a hundred minutes": 6000, "a minute": 60, "one hour": 3600, "ten seconds": 10, "seventy seconds": 70,
		"twenty minutes five seconds": 1205, "half a minute": 30,
	} {
		if got, ok := ParseDuration(s); !ok || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "minutes", "five", "five bananas", "twenty five", "soon"} {
		if got, ok := ParseDuration(s); ok {
			t.Errorf("%q parsed as %d", s, got)
		}
	}
}

func TestScore(t *testing.T) {
	sec := 300
	timer := Case{Want: "set_timer", Seconds: &sec}
	if ok, why := Score(timer, []llm.ToolCall{{Name: "set_timer", Arguments: `{"duration": "5 minutes"}`}}); !ok {
		t.Error(why)
	}
	if ok, _ := Score(timer, []llm.ToolCall{{Name: "set_timer", Arguments: `{"duration": "fifteen minutes"}`}}); ok {
		t.Error("wrong length scored right")
	}
	if ok, _ := Score(timer, nil); ok {
		t.Error("no call scored right")
	}
	vol := Case{Want: "self_audio_speaker_set_volume", Args: map[string]any{"volume": 30.0}}
	if ok, why := Score(vol, []llm.ToolCall{{Name: "self_audio_speaker_set_volume", Arguments: `{"volume": 30}`}}); !ok {
		t.Error(why)
	}
	if ok, _ := Score(vol, []llm.ToolCall{{Name: "adjust_volume", Arguments: `{"step": 10}`}}); ok {
		t.Error("wrong tool scored right")
	}
	if ok, _ := Score(Case{}, []llm.ToolCall{{Name: "get_time", Arguments: `{}`}}); ok {
		t.Error("a call for an ordinary question scored right")
	}
	if Length(5400) != "1 hour 30 minutes" || Length(61) != "1 minute 1 second" {
		t.Error(Length(5400), Length(61))
	}
}
