package voiceclient

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

func loud(n int) []int16 {
	pcm := make([]int16, n)
	for i := range pcm {
		pcm[i] = int16(6000 * (i/4%2*2 - 1))
	}
	return pcm
}

// The end of speech is the last audible sample sent before the final
// transcript; heard is when the first audible answer sample plays.
func TestMeter(t *testing.T) {
	const rate, frame = 16000, 320
	m := NewMeter(rate, rate)
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	// 10 frames of speech, the last half-audible, then silence.
	for i := range 10 {
		m.Sent(loud(frame), ms(20*(i+1)))
	}
	half := append(loud(frame/2), make([]int16, frame/2)...)
	m.Sent(half, ms(220)) // audible up to 210 ms
	for i := range 30 {
		m.Sent(make([]int16, frame), ms(240+20*i))
	}
	m.Sent(loud(frame), ms(860)) // the next question starts before the final
	m.EndOfSpeech(1, ms(880))    // the final's arrival: too late
	m.EndOfSpeech(1, ms(700))    // the server's speech_end from the trace
	m.Answering(1)
	// The first answer frame arrives at 800 ms and is silent; the second,
	// audible from 5 ms in, arrives at 805 ms but plays after the first.
	if !m.Received(make([]int16, frame), ms(800)) {
		t.Error("first frame not reported first")
	}
	second := append(make([]int16, 80), loud(frame-80)...)
	if m.Received(second, ms(805)) {
		t.Error("second frame reported first")
	}
	if v, ok := m.VoiceToVoiceMs(1); !ok || v != 800-210 {
		t.Errorf("voice-to-voice %.1f ms, %v; want %d", v, ok, 800-210)
	}
	if h, ok := m.HeardMs(1); !ok || h != 800+20+5-210 {
		t.Errorf("heard %.1f ms, %v; want %d", h, ok, 800+20+5-210)
	}
	if _, ok := m.HeardMs(2); ok {
		t.Error("turn 2 has a heard figure")
	}
	if p := m.PlayedMs(1, ms(810)); p != 10 {
		t.Errorf("played %.1f ms at 810 ms, want 10", p)
	}
}

// Room noise is not speech, even where it is audible: a real recording's
// speech ends with its last word, and the answer is heard from there.
func TestMeterRoomNoise(t *testing.T) {
	const rate, frame = 16000, 320
	m := NewMeter(rate, rate)
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	rng := rand.New(rand.NewPCG(5, 6))
	room := 32768 * math.Pow(10, (audio.AudibleDBFS+3)/20)
	// 300 ms of room, 500 ms of speech, 1 s of room: frame i ends at 20(i+1) ms.
	var roomFrame []int16
	for i := range 90 {
		pcm := make([]int16, frame)
		for j := range pcm {
			v := rng.NormFloat64() * room
			if i >= 15 && i < 40 {
				v += 3000 * math.Sin(2*math.Pi*180*float64(i*frame+j)/rate)
			}
			pcm[j] = int16(v)
		}
		if i == 60 {
			roomFrame = pcm
		}
		m.Sent(pcm, ms(20*(i+1)))
	}
	if audio.AudibleEnd(roomFrame, rate) < frame*3/4 {
		t.Fatal("the room is not audible: the test proves nothing")
	}
	m.EndOfSpeech(1, ms(800+150)) // the server's speech_end plus the slack
	m.Answering(1)
	m.Received(loud(frame), ms(1200))
	if h, ok := m.HeardMs(1); !ok || h != 1200-800 {
		t.Errorf("heard %.1f ms, %v; want %d (from the end of the last word)", h, ok, 1200-800)
	}
}

func TestMeterAllocs(t *testing.T) {
	m := NewMeter(16000, 16000)
	pcm := loud(320)
	now := time.Now()
	if a := testing.AllocsPerRun(100, func() {
		m.Sent(pcm, now)
		m.Received(pcm, now)
	}); a != 0 {
		t.Errorf("%.1f allocations per frame", a)
	}
}
