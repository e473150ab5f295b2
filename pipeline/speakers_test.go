package pipeline

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// speakerProfile is a known profile: 2 s of a voice between 100 and 160 Hz.
func speakerProfile(t *testing.T) audio.PitchProfile {
	t.Helper()
	in, err := audio.NewIntonation(16000, 320)
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range [][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}} {
		pcm := glide(500, 16000, seg[0], seg[1])
		for i := 0; i+320 <= len(pcm); i += 320 {
			in.Speech(pcm[i : i+320])
		}
	}
	p := in.Profile()
	if !p.Known() {
		t.Fatal("2 s of voice: profile not known")
	}
	return p
}

func TestSpeakerMemory(t *testing.T) {
	if NewSpeakerMemory(0, 0, time.Hour) != nil || NewSpeakerMemory(10, 4, 0) != nil {
		t.Error("a limit or TTL of 0: want no memory (nil)")
	}
	var off *SpeakerMemory
	off.Remember("a", speakerProfile(t)) // a nil memory remembers nothing, without failing
	if _, ok := off.Recall("a"); ok || off.Len() != 0 {
		t.Error("nil memory recalled something")
	}

	now := time.Unix(1000, 0)
	m := NewSpeakerMemory(2, 0, time.Hour)
	m.now = func() time.Time { return now }
	p := speakerProfile(t)
	m.Remember("a", p)
	m.Remember("", p)
	m.Remember(strings.Repeat("x", MaxDeviceIDBytes+1), p)
	m.Remember("unknown", audio.PitchProfile{})
	if m.Len() != 1 {
		t.Fatalf("remembered %d devices, want 1 (empty and over-long ids, unknown profiles are not kept)", m.Len())
	}
	if got, ok := m.Recall("a"); !ok || got != p {
		t.Error("device a: profile not recalled as remembered")
	}
	m.Remember("b", p)
	_, _ = m.Recall("a") // a recall does not refresh: remembering does
	m.Remember("c", p)
	if _, ok := m.Recall("a"); ok {
		t.Error("3 devices in a memory of 2: the least recently remembered (a) should be gone")
	}
	if _, ok := m.Recall("b"); !ok {
		t.Error("device b forgotten too soon")
	}
	now = now.Add(time.Hour + time.Second)
	if _, ok := m.Recall("c"); ok {
		t.Error("past the TTL: device c still recalled")
	}
	if m.Len() != 1 {
		t.Errorf("%d devices after c expired, want 1", m.Len())
	}
}

func TestSpeakerMemoryVoices(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewSpeakerMemory(0, 3, time.Hour) // voices only
	if m == nil {
		t.Fatal("no devices but 2 voices: want a memory")
	}
	m.now = func() time.Time { return now }
	p := speakerProfile(t)
	if m.Voices() != nil {
		t.Error("a new memory offers voices")
	}
	m.Remember("", p)
	m.Remember("a", p)
	if m.Len() != 0 {
		t.Errorf("%d devices remembered by a memory of none", m.Len())
	}
	// Heard (0.4 s) but not knowing a range: a device's, not a voice to borrow.
	in, _ := audio.NewIntonation(16000, 320)
	pcm := glide(600, 16000, 130, 110)
	for i := 0; i+320 <= len(pcm); i += 320 {
		in.Speech(pcm[i : i+320])
	}
	if short := in.Profile(); !short.Heard() || short.Known() {
		t.Fatal("0.6 s of voice: want heard, not known")
	} else {
		m.Remember("", short)
	}
	if v := m.Voices(); len(v) != 2 || v[0] != p || v[1] != p {
		t.Errorf("voices %d, want the 2 known profiles (the short one not lent)", len(v))
	}
	// A second short session of that register adds to the first: together
	// they know a range, and take no slot of their own.
	m.Remember("", in.Profile())
	if v := m.Voices(); len(v) != 3 {
		t.Errorf("voices %d after two short sessions of one register, want 3", len(v))
	}
	now = now.Add(time.Hour + time.Second)
	if v := m.Voices(); v != nil {
		t.Errorf("past the TTL: %d voices offered", len(v))
	}
}

// speakerSession runs a session of device that says speech, whose text
// scores 0.3, with the intonation cue on (1.5 log-odds), and returns its
// turn's trace.
func speakerSession(t *testing.T, mem *SpeakerMemory, device string, speech []int16) Event {
	t.Helper()
	var tr Event
	synctest.Test(t, func(t *testing.T) {
		c := semanticConfig()
		c.Turn.Threshold = 0.5
		c.Turn.IntonationYield = 1.5
		c.Device = device
		a, m, s := newBackends([]string{"where is the station"}, answer("North."))
		h := &harness{t: t, cfg: c, llm: m, tts: s, obs: &recObserver{}}
		sess, err := NewSession("test", c, Backends{ASR: a, LLM: m, TTS: s, EOU: &fixedScorer{score: 0.3}, Speakers: mem}, h.obs, zerolog.Nop())
		if err != nil {
			t.Fatalf("NewSession: %v", err)
		}
		h.start(sess, m)
		h.audio(false, 200)
		h.say(speech)
		h.audio(false, 1500)
		tr = *events(h.until("trace event", isEvent(EventTrace)), EventTrace)[0]
		h.close()
	})
	return tr
}

// TestSpeakerRememberedAcrossSessions: a device's second session places
// the end of its first, short phrase in the speaker's range learnt by the
// first session, and commits it on the falling ending's cue; a session of
// another device, or of the same device with another voice, cannot.
func TestSpeakerRememberedAcrossSessions(t *testing.T) {
	mem := NewSpeakerMemory(16, 0, time.Hour)
	session := func(device string, speech []int16) Event { return speakerSession(t, mem, device, speech) }
	// 0.6 s, falling to the bottom of a 100-160 Hz voice.
	phrase := append(glide(300, 16000, 140, 130), glide(300, 16000, 125, 95)...)
	if tr := session("kitchen", phrase); tr.Intonation != nil {
		t.Errorf("a new device's first phrase: intonation %v, want none (the range is not known)", *tr.Intonation)
	}
	var long []int16
	for _, seg := range [][2]float64{{120, 150}, {150, 115}, {105, 135}, {140, 110}, {125, 92}} {
		long = append(long, glide(400, 16000, seg[0], seg[1])...)
	}
	session("kitchen", long)
	if mem.Len() != 1 {
		t.Fatalf("%d devices remembered after a 2 s session, want 1", mem.Len())
	}
	tr := session("kitchen", phrase)
	if tr.Intonation == nil || *tr.Intonation <= 0 || tr.EndSilenceMs > 500 {
		t.Errorf("the device's next first phrase: intonation %v, end_silence_ms %d: want a yield and a wait under 500 ms", tr.Intonation, tr.EndSilenceMs)
	}
	if tr := session("hall", phrase); tr.Intonation != nil {
		t.Errorf("another device: intonation %v, want none", *tr.Intonation)
	}
	child := append(glide(300, 16000, 300, 290), glide(300, 16000, 280, 240)...)
	if tr := session("kitchen", child); tr.Intonation != nil {
		t.Errorf("another voice at the device: intonation %v, want the profile dropped", *tr.Intonation)
	}
}

// TestVoiceBorrowedForRegister: with remember_voices, a session nobody
// remembers (another device, or none) places the end of its first phrase
// in the range of a voice of its register heard earlier; a voice of
// another register borrows nothing.
func TestVoiceBorrowedForRegister(t *testing.T) {
	mem := NewSpeakerMemory(16, 8, time.Hour)
	session := func(device string, speech []int16) Event { return speakerSession(t, mem, device, speech) }
	phrase := append(glide(300, 16000, 140, 130), glide(300, 16000, 125, 95)...)
	if tr := session("", phrase); tr.Intonation != nil {
		t.Errorf("the server's first voice: intonation %v, want none (nothing to borrow)", *tr.Intonation)
	}
	var long []int16
	for _, seg := range [][2]float64{{120, 150}, {150, 115}, {105, 135}, {140, 110}, {125, 92}} {
		long = append(long, glide(400, 16000, seg[0], seg[1])...)
	}
	session("", long) // 2 s of a low voice, no device
	for _, device := range []string{"", "hall"} {
		tr := session(device, phrase)
		if tr.Intonation == nil || *tr.Intonation <= 0 || tr.EndSilenceMs > 500 {
			t.Errorf("device %q, first phrase of a low voice: intonation %v, end_silence_ms %d: want a yield and a wait under 500 ms", device, tr.Intonation, tr.EndSilenceMs)
		}
	}
	child := append(glide(300, 16000, 300, 290), glide(300, 16000, 280, 240)...)
	if tr := session("", child); tr.Intonation != nil {
		t.Errorf("a high voice: intonation %v, want none (no voice of its register)", *tr.Intonation)
	}
}
