package lkagent

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web"
)

// rtcPeer is a direct WebRTC client of a voxpipe server (POST /rtc/offer),
// as the browser page is: a microphone track, the answer track, events on
// the "events" data channel.
type rtcPeer struct {
	*listener
	pc  *webrtc.PeerConnection
	mic *webrtc.TrackLocalStaticSample
}

func dialRTC(t testing.TB, baseURL string) *rtcPeer {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	var me webrtc.MediaEngine
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	pc, err := webrtc.NewAPI(webrtc.WithMediaEngine(&me), webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	p := &rtcPeer{listener: newListener(t), pc: pc}
	p.mic, err = webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rate, Channels: 2}, "mic", "peer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.AddTrack(p.mic); err != nil {
		t.Fatal(err)
	}
	dc, err := pc.CreateDataChannel("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	dc.OnOpen(func() { close(opened) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) { p.onEvent(m.Data) })
	p.report = func(msg []byte) { _ = dc.SendText(string(msg)) }
	pc.OnTrack(func(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { p.play(track) })
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	body, _ := json.Marshal(pc.LocalDescription())
	resp, err := http.Post(baseURL+"/rtc/offer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post offer: %v", err)
	}
	defer resp.Body.Close()
	var answer webrtc.SessionDescription
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&answer) != nil {
		t.Fatalf("offer answered HTTP %d", resp.StatusCode)
	}
	if err := pc.SetRemoteDescription(answer); err != nil {
		t.Fatal(err)
	}
	select {
	case <-opened:
	case <-time.After(30 * time.Second):
		t.Fatal("events channel did not open within 30 s")
	}
	return p
}

func (p *rtcPeer) say(pcm []int16, tailMs int) time.Time {
	return say(p.t, p.mic.WriteSample, pcm, tailMs)
}

// cpuSeconds is the user+system CPU time process pid has used.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the ")" that ends the command name: state is field 3,
	// utime and stime are 14 and 15, in clock ticks (100 a second on Linux).
	i := bytes.LastIndexByte(data, ')')
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100
}

// BenchmarkHeardLiveKitVsWebRTC measures heard latency at the client, from
// the last packet of the spoken question to the first audible packet of
// the answer, on the same backends through two paths in one run: a
// LiveKit participant whose room the agent serves (client → livekit-server
// → agent and back), and a direct WebRTC client of voxpipe's own
// /rtc/offer. The turns alternate (which path goes first alternates too);
// it reports each path's median and the median of the paired differences;
// each path's part of heard latency outside the server's voice-to-voice
// (heard − the trace's voice_to_voice_ms: the trip up and down and the
// receiver's buffering), which the pipeline's own variance does not touch;
// and the livekit-server process's CPU per second of the run.
//
//	go test -run '^$' -bench HeardLiveKitVsWebRTC -benchtime 10x ./web/lkagent
func BenchmarkHeardLiveKitVsWebRTC(b *testing.B) {
	lk := startLiveKit(b)
	rec, synth := engines(b)
	question := speech(b, synth, "what is the weather like today")
	pc := pipeline.DefaultConfig()
	pc.SystemPrompt = "You are a test."
	be := pipeline.Backends{ASR: rec, LLM: sessiontest.LLM{Answer: "It is sunny today."}, TTS: synth}

	srv, err := web.New(web.Config{MaxSessions: 4, MaxFrameBytes: 4096, IdleTimeout: time.Minute, Pipeline: pc,
		RTC: web.RTCConfig{IncludeLoopback: true}}, be, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		hs.Close()
		_ = srv.Shutdown(b.Context())
	})
	_, _, _ = startWorker(b, lk, func(c *Config) { c.Pipeline = pc })

	direct := dialRTC(b, hs.URL)
	direct.waitEvent(30*time.Second, "ready (webrtc)", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	viaLK := joinCaller(b, lk, "room-bench", "caller")
	viaLK.waitEvent(30*time.Second, "ready (livekit)", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })

	// turn returns the client's heard latency and its part outside the
	// server's voice-to-voice (the trip up and down, the jitter buffers).
	turn := func(l *listener, speak func([]int16, int) time.Time) (heard, transport float64) {
		spoken := speak(question, 1200)
		tr := l.waitEvent(30*time.Second, "trace", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace })
		n, first := l.heard(tr.Turn)
		if n < 10 || first.IsZero() || tr.VoiceToVoiceMs == nil {
			b.Fatalf("turn %d: %d audible answer packets, server v2v %v", tr.Turn, n, tr.VoiceToVoiceMs)
		}
		heard = float64(first.Sub(spoken).Microseconds()) / 1000
		return heard, heard - *tr.VoiceToVoiceMs
	}
	var lkMs, rtcMs, diffs, lkNet, rtcNet []float64
	cpu0, wall0 := cpuSeconds(lk.pid), time.Now()
	b.ResetTimer()
	for i := range b.N {
		var l, r, ln, rn float64
		if i%2 == 0 {
			l, ln = turn(viaLK.listener, viaLK.say)
			r, rn = turn(direct.listener, direct.say)
		} else {
			r, rn = turn(direct.listener, direct.say)
			l, ln = turn(viaLK.listener, viaLK.say)
		}
		lkMs, rtcMs, diffs = append(lkMs, l), append(rtcMs, r), append(diffs, l-r)
		lkNet, rtcNet = append(lkNet, ln), append(rtcNet, rn)
		b.Logf("pair %d: heard livekit %.1f ms (%.1f outside the server), webrtc %.1f ms (%.1f), difference %+.1f ms", i+1, l, ln, r, rn, l-r)
	}
	b.StopTimer()
	cores := (cpuSeconds(lk.pid) - cpu0) / time.Since(wall0).Seconds()
	b.ReportMetric(median(lkMs), "livekit-heard-ms")
	b.ReportMetric(median(rtcMs), "webrtc-heard-ms")
	b.ReportMetric(median(diffs), "paired-diff-ms")
	b.ReportMetric(median(lkNet), "livekit-transport-ms")
	b.ReportMetric(median(rtcNet), "webrtc-transport-ms")
	b.ReportMetric(cores, "sfu-cores")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
