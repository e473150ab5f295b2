package voice

import (
	"encoding/json"
	"testing"
)

// TestStartEchoCancelled: start's echo_cancelled is absent (a browser,
// which cancels its own echo), true or false (a loudspeaker device whose
// echo the server cancels).
func TestStartEchoCancelled(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"start","sample_rate":16000}`:                        "absent",
		`{"type":"start","sample_rate":16000,"echo_cancelled":true}`:  "true",
		`{"type":"start","sample_rate":16000,"echo_cancelled":false}`: "false",
	} {
		var m Message
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		got := "absent"
		if m.EchoCancelled != nil {
			got = map[bool]string{true: "true", false: "false"}[*m.EchoCancelled]
		}
		if got != want {
			t.Errorf("%s: echo_cancelled %s, want %s", in, got, want)
		}
	}
}
