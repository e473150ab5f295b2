package voice

import (
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

func TestRulesOneStartPerSession(t *testing.T) {
	var r Rules
	if _, _, _, p := r.Parse([]byte(`{"type":"interrupt","turn":1}`)); p == nil || p.Code != pipeline.CodeNotStarted {
		t.Fatalf("interrupt before start: %v, want not_started", p)
	}
	if _, _, start, p := r.Parse([]byte(`{"type":"start","sample_rate":16000}`)); !start || p != nil {
		t.Fatalf("first start: start=%v problem=%v", start, p)
	}
	// A refused start (bad format, say) may be retried: nothing accepted yet.
	if _, _, start, p := r.Parse([]byte(`{"type":"start","sample_rate":16000}`)); !start || p != nil {
		t.Fatalf("start retried: start=%v problem=%v", start, p)
	}
	r.AcceptStart()
	r.Running()
	if _, _, _, p := r.Parse([]byte(`{"type":"start","sample_rate":16000}`)); p == nil || p.Code != pipeline.CodeBadMessage {
		t.Fatalf("second start: %v, want bad_message", p)
	}
	_, ev, _, p := r.Parse([]byte(`{"type":"interrupt","turn":3,"played_ms":120.5}`))
	if p != nil || ev == nil || ev.Type != pipeline.ClientInterrupt || ev.Turn != 3 || ev.PlayedMs != 120.5 {
		t.Fatalf("interrupt: %+v %v", ev, p)
	}
	for in, code := range map[string]string{
		`not json`:         pipeline.CodeBadMessage,
		`{"turn":1}`:       pipeline.CodeBadMessage,
		`{"type":"dance"}`: pipeline.CodeUnknownType,
		`{"type":5}`:       pipeline.CodeBadMessage,
	} {
		if _, _, _, p := r.Parse([]byte(in)); p == nil || p.Code != code {
			t.Errorf("%s: %v, want %s", in, p, code)
		}
	}
}

func TestUplinkRingNeverReusesASlotInFlight(t *testing.T) {
	const q = 3
	in := make(chan pipeline.Input, q)
	up, err := NewUplink(in, EncodingPCM16, 16000)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 640)
	// held is the message the session is working on, with the value it had.
	var held []int16
	var heldVal int16
	check := func(i int) {
		if held != nil && held[0] != heldVal {
			t.Fatalf("write %d overwrote the buffer the session is reading", i)
		}
	}
	for i := range 60 {
		msg[0] = byte(i)
		ok, p := up.Write(msg)
		if p != nil {
			t.Fatal(p)
		}
		check(i)
		if !ok || i%2 == 0 {
			// The session finishes what it held and takes the next one.
			m := <-in
			held, heldVal = m.Audio, m.Audio[0]
			check(i)
		}
	}
}

func TestUplinkDropsWhenFullAndRejectsBadAudio(t *testing.T) {
	in := make(chan pipeline.Input, 1)
	up, err := NewUplink(in, EncodingPCM16, 16000)
	if err != nil {
		t.Fatal(err)
	}
	if q, p := up.Write(make([]byte, 640)); !q || p != nil {
		t.Fatalf("first: %v %v", q, p)
	}
	if q, p := up.Write(make([]byte, 640)); q || p != nil {
		t.Fatalf("full queue: queued=%v problem=%v, want a silent drop", q, p)
	}
	if _, p := up.Write(make([]byte, 3)); p == nil || p.Code != pipeline.CodeBadAudio {
		t.Fatalf("odd length: %v", p)
	}
	op, err := NewUplink(make(chan pipeline.Input, 1), EncodingOpus, 16000)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	if _, p := op.Write([]byte{0xff, 0xff, 0xff}); p == nil || p.Code != pipeline.CodeBadAudio {
		t.Fatalf("garbage opus: %v", p)
	}
}

func TestDownlinkGathersSixtyMsPackets(t *testing.T) {
	d, err := NewOpusDownlink(24000, 24000, 60)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	frame := make([]int16, 24000*FrameMs/1000)
	for i := range 2 {
		if pkt, err := d.Write(frame); err != nil || pkt != nil {
			t.Fatalf("frame %d: %d bytes, %v (want nothing yet)", i, len(pkt), err)
		}
	}
	pkt, err := d.Write(frame)
	if err != nil || len(pkt) == 0 {
		t.Fatalf("third frame: %d bytes, %v", len(pkt), err)
	}
	dec, _ := audio.NewOpusDecoder(24000)
	pcm := make([]int16, MaxOpusFrameSamples)
	if n, err := dec.Decode(pkt, pcm); err != nil || n != 1440 {
		t.Fatalf("decoded %d samples, %v; want 1440 (60 ms)", n, err)
	}
	_, _ = d.Write(frame)
	if !d.Pending() {
		t.Fatal("a partial packet is not pending")
	}
	pkt, err = d.Flush()
	if err != nil || len(pkt) == 0 {
		t.Fatalf("flush: %d bytes, %v", len(pkt), err)
	}
	if n, _ := dec.Decode(pkt, pcm); n != 1440 {
		t.Fatalf("flushed packet is %d samples, want 1440", n)
	}
	if pkt, _ := d.Flush(); pkt != nil {
		t.Fatal("flush with nothing pending returned a packet")
	}
	if _, err := NewOpusDownlink(24000, 24000, 30); err == nil {
		t.Fatal("30 ms packets accepted")
	}
}

func TestNoAllocationPerFrame(t *testing.T) {
	enc, err := audio.NewOpusEncoder(16000, 24000)
	if err != nil {
		t.Skip("opus unavailable (requires cgo and libopus-dev):", err)
	}
	pkt := make([]byte, audio.MaxOpusPacket)
	n, _ := enc.Encode(make([]int16, 960), pkt)
	in := make(chan pipeline.Input, 4)
	up, _ := NewUplink(in, EncodingOpus, 16000)
	down, _ := NewOpusDownlink(24000, 24000, 60)
	frame := make([]int16, 480)
	allocs := testing.AllocsPerRun(200, func() {
		if q, p := up.Write(pkt[:n]); !q || p != nil {
			t.Fatal(q, p)
		}
		<-in
		for range 3 {
			if _, err := down.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 60 ms frame each way, want 0", allocs)
	}
}

// FuzzParse feeds arbitrary text frames through the control rules and the
// start validation: never a panic, every refusal has a code, and an
// accepted start always names a supported format.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"start","sample_rate":16000,"encoding":"pcm16"}`))
	f.Add([]byte(`{"type":"start","sample_rate":48000,"encoding":"opus","output_sample_rate":24000}`))
	f.Add([]byte(`{"type":"interrupt","turn":3,"played_ms":1234.5}`))
	f.Add([]byte(`{"type":5}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Rules
		r.Running()
		msg, ev, start, p := r.Parse(data)
		if p != nil {
			if p.Code == "" || p.Message == "" {
				t.Fatalf("problem without code or message: %+v", p)
			}
			return
		}
		if !start {
			if ev == nil {
				t.Fatalf("%q: neither start, event nor problem", data)
			}
			return
		}
		enc, out, p := ValidateStart(msg)
		if p != nil {
			return
		}
		if (enc != EncodingPCM16 && enc != EncodingOpus) || out < 8000 || out > 48000 || msg.SampleRate < 8000 || msg.SampleRate > 48000 ||
			out%50 != 0 || msg.SampleRate%50 != 0 {
			t.Fatalf("accepted %q as %s in, %d out", data, enc, out)
		}
	})
}

// TestValidateStartRates: every rate the bad_format message offers is
// accepted (both ways, pcm16), and 11025, which the resampler takes but
// which makes no whole 20 ms frame, is refused with a message that does
// not offer it.
func TestValidateStartRates(t *testing.T) {
	for _, rate := range []int{8000, 12000, 16000, 22050, 24000, 32000, 44100, 48000} {
		if _, _, p := ValidateStart(Message{SampleRate: rate, OutputSampleRate: rate}); p != nil {
			t.Errorf("pcm16 %d Hz refused: %s", rate, p.Message)
		}
	}
	for _, msg := range []Message{{SampleRate: 11025}, {SampleRate: 16000, OutputSampleRate: 11025}, {SampleRate: 11000}} {
		_, _, p := ValidateStart(msg)
		if p == nil || p.Code != pipeline.CodeBadFormat || strings.Contains(p.Message, "11025,") || !strings.Contains(p.Message, "22050") {
			t.Errorf("start %+v: %+v, want bad_format listing the rates that work", msg, p)
		}
	}
}
