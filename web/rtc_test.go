package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// rtcClient is a pion peer playing a browser: it streams its microphone
// as Opus at real-time pace, "plays" the answer track (playback_start on a
// turn's first audible frame) and collects the data channel's events.
type rtcClient struct {
	t      *testing.T
	pc     *webrtc.PeerConnection
	mic    *webrtc.TrackLocalStaticSample
	dc     *webrtc.DataChannel
	speech chan []int16
	events chan pipeline.Event // from the data channel; never closed (pion sends)
	opened chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup // the mic goroutine

	mu         sync.Mutex // guards the fields below
	answerTurn int
	audible    map[int]int // audible answer frames per turn
	played     map[int]bool
	arrivals   []rtpArrival // every answer-track packet, in arrival order
}

// rtpArrival is when a packet of the server's audio track arrived.
type rtpArrival struct {
	at      time.Time
	ts      uint32 // its RTP timestamp (48 kHz)
	audible bool
}

func newRTCClient(t *testing.T, baseURL string) *rtcClient {
	t.Helper()
	return newRTCClientWith(t, baseURL, nil)
}

// newRTCClientWith is newRTCClient with edit adjusting the client's
// settings.
func newRTCClientWith(t *testing.T, baseURL string, edit func(*webrtc.SettingEngine)) *rtcClient {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	if edit != nil {
		edit(&se)
	}
	var me webrtc.MediaEngine
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	opts := []func(*webrtc.API){webrtc.WithMediaEngine(&me), webrtc.WithSettingEngine(se)}
	if rtcClientInterceptors != nil {
		opts = append(opts, webrtc.WithInterceptorRegistry(rtcClientInterceptors))
	}
	api := webrtc.NewAPI(opts...)
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	c := &rtcClient{t: t, pc: pc, speech: make(chan []int16, 4), events: make(chan pipeline.Event, 1024),
		opened: make(chan struct{}), audible: map[int]int{}, played: map[int]bool{}}
	t.Cleanup(func() { _ = pc.Close() })
	c.mic, err = webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.AddTrack(c.mic); err != nil {
		t.Fatal(err)
	}
	if c.dc, err = pc.CreateDataChannel(rtcEventsLabel, nil); err != nil {
		t.Fatal(err)
	}
	var openOnce sync.Once
	c.dc.OnOpen(func() { openOnce.Do(func() { close(c.opened) }) })
	c.dc.OnMessage(c.onEvent)
	pc.OnTrack(c.play)

	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	answer := postOffer(t, baseURL, *pc.LocalDescription(), http.StatusOK)
	if err := pc.SetRemoteDescription(answer); err != nil {
		t.Fatalf("answer: %v", err)
	}
	select {
	case <-c.opened:
	case <-time.After(30 * time.Second):
		t.Fatal("events data channel did not open within 30 s")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() { c.talk(ctx) })
	t.Cleanup(c.close)
	return c
}

// postOffer sends an offer and decodes the answer (or checks the status).
func postOffer(t *testing.T, baseURL string, offer webrtc.SessionDescription, wantStatus int) webrtc.SessionDescription {
	t.Helper()
	body, _ := json.Marshal(offer)
	resp, err := http.Post(baseURL+"/rtc/offer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post offer: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != wantStatus {
		t.Fatalf("offer answered HTTP %d, want %d", resp.StatusCode, wantStatus)
	}
	var answer webrtc.SessionDescription
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("answer body: %v", err)
	}
	return answer
}

func (c *rtcClient) close() {
	c.cancel()
	c.wg.Wait()
	_ = c.pc.Close()
}

func (c *rtcClient) send(v any) {
	if err := c.dc.SendText(string(mustJSON(v))); err != nil {
		c.t.Logf("data channel send: %v", err)
	}
}

// talk sends one 20 ms Opus frame per tick: queued speech, else silence.
func (c *rtcClient) talk(ctx context.Context) {
	const frame = 48000 / 50
	enc, err := audio.NewOpusEncoder(48000, 32000)
	if err != nil {
		c.t.Errorf("opus encoder: %v", err)
		return
	}
	packet := make([]byte, audio.MaxOpusPacket)
	paceMic(ctx, c.speech, frame, func(pcm []int16) error {
		n, err := enc.Encode(pcm, packet)
		if err != nil {
			c.t.Errorf("opus encode: %v", err)
			return err
		}
		return c.mic.WriteSample(media.Sample{Data: packet[:n], Duration: 20 * time.Millisecond})
	})
}

// play decodes the answer track; pion runs it in its own goroutine until
// the connection closes.
func (c *rtcClient) play(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
	dec, err := audio.NewOpusDecoder(48000)
	if err != nil {
		c.t.Errorf("opus decoder: %v", err)
		return
	}
	pcm := make([]int16, maxOpusFrameSamples)
	for {
		pkt, _, err := track.ReadRTP()
		if err != nil {
			return
		}
		at := time.Now()
		n, err := dec.Decode(pkt.Payload, pcm)
		if err != nil {
			c.t.Errorf("answer audio: undecodable opus packet: %v", err)
			return
		}
		loud := audible(pcm[:n])
		c.mu.Lock()
		c.arrivals = append(c.arrivals, rtpArrival{at: at, ts: pkt.Timestamp, audible: loud})
		c.mu.Unlock()
		if !loud {
			continue
		}
		c.mu.Lock()
		turn := c.answerTurn
		c.audible[turn]++
		first := turn > 0 && !c.played[turn]
		c.played[turn] = true
		c.mu.Unlock()
		if first {
			c.send(map[string]any{"type": "playback_start", "turn": turn})
		}
	}
}

// checkRTPPace asserts that the answer's packets arrive at the pace of
// the silence before them: a packet's relative delay (arrival time minus
// RTP time) is never much below the silence's. The pipeline's pacer runs
// output_lead_ms ahead of real time; packets sent that early make a
// receiver's jitter buffer see the ones after them as late, and grow.
func checkRTPPace(t *testing.T, c *rtcClient) {
	t.Helper()
	c.mu.Lock()
	arr := append([]rtpArrival(nil), c.arrivals...)
	c.mu.Unlock()
	first := slices.IndexFunc(arr, func(a rtpArrival) bool { return a.audible })
	if first < 20 {
		t.Errorf("%d packets before the answer's first audible one, want at least 20 of silence", first)
		return
	}
	delay := func(a rtpArrival) float64 { // ms, from the first packet
		return float64(a.at.Sub(arr[0].at))/float64(time.Millisecond) - float64(a.ts-arr[0].ts)/48
	}
	var silence []float64
	for _, a := range arr[first-20 : first] {
		silence = append(silence, delay(a))
	}
	slices.Sort(silence)
	ref := silence[len(silence)/2]
	earliest, at := ref, 0
	for i, a := range arr[first:] {
		if d := delay(a); a.audible && d < earliest {
			earliest, at = d, i
		}
	}
	if ahead := ref - earliest; ahead > 25 {
		t.Errorf("answer packet %d arrived %.0f ms ahead of the stream's pace (relative delay %.1f ms, the silence before %.1f ms)", at, ahead, earliest, ref)
	} else {
		t.Logf("answer packets at most %.1f ms ahead of the silence's pace", ahead)
	}
}

// audible reports a frame louder than Opus's decoded silence.
func audible(pcm []int16) bool {
	for _, s := range pcm {
		if s > 64 || s < -64 {
			return true
		}
	}
	return false
}

func (c *rtcClient) onEvent(m webrtc.DataChannelMessage) {
	var ev pipeline.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		c.t.Errorf("bad event %q: %v", m.Data, err)
		return
	}
	if ev.Type == pipeline.EventAnswer {
		c.mu.Lock()
		c.answerTurn = ev.Turn
		c.mu.Unlock()
	}
	select {
	case c.events <- ev:
	default:
		c.t.Errorf("event queue full, dropped %+v", ev)
	}
}

func (c *rtcClient) until(what string, match func(pipeline.Event) bool) []pipeline.Event {
	c.t.Helper()
	timeout := time.After(90 * time.Second)
	var got []pipeline.Event
	for {
		select {
		case ev := <-c.events:
			got = append(got, ev)
			if ev.Type == pipeline.EventError {
				c.t.Fatalf("error event waiting for %s: %+v", what, ev)
			}
			if match(ev) {
				return got
			}
		case <-timeout:
			c.t.Fatalf("no %s within 90 s; events: %+v", what, got)
		}
	}
}

func (c *rtcClient) audibleFrames(turn int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.audible[turn]
}

func rtcTestServer(t *testing.T, answers []string, edit func(*Config)) *testServer {
	return newTestServer(t, answers, func(cfg *Config) {
		cfg.RTC.IncludeLoopback = true
		if edit != nil {
			edit(cfg)
		}
	})
}

// TestRTCEndToEnd speaks a question over WebRTC (Opus at 48 kHz) into a
// real server and checks the transcript, the answer text and audio, the
// trace, and that the session ends when the client closes its peer.
func TestRTCEndToEnd(t *testing.T) {
	checkLeaks(t)
	const question = "what is the weather like today"
	const answer = "It is sunny and warm today. Enjoy the day."
	ts := rtcTestServer(t, []string{answer}, nil)
	c := newRTCClient(t, ts.http.URL)
	ready := c.until("ready", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	if ev := ready[len(ready)-1]; ev.Encoding != EncodingOpus || ev.SampleRate != 48000 || ev.FrameMs != FrameMs {
		t.Errorf("ready %+v, want opus at 48000 Hz, 20 ms", ev)
	}
	c.speech <- utterance(t, question, 48000)
	events := c.until("trace of turn 1", traceOf(1))

	var transcript, answerText strings.Builder
	var trace pipeline.Event
	var audioEv *pipeline.Event
	for i, ev := range events {
		switch ev.Type {
		case pipeline.EventTranscript:
			if ev.Final {
				transcript.WriteString(ev.Text)
			}
		case pipeline.EventAnswer:
			answerText.WriteString(ev.Text)
		case pipeline.EventAudio:
			audioEv = &events[i]
		case pipeline.EventTrace:
			trace = ev
		}
	}
	ref, hyp := asrtest.Words(question), asrtest.Words(transcript.String())
	if errs, n := asrtest.WER(ref, hyp); float64(errs)/float64(n) > 0.5 {
		t.Errorf("transcript %q: WER %d/%d against %q", transcript.String(), errs, n, question)
	}
	if got := strings.Join(strings.Fields(answerText.String()), " "); got != answer {
		t.Errorf("answer %q, want %q", got, answer)
	}
	if audioEv == nil || audioEv.Encoding != EncodingOpus || audioEv.SampleRate != 48000 {
		t.Errorf("audio event %+v, want opus at 48000 Hz", audioEv)
	}
	// The trace comes after the last frame was handed over; the network
	// may still hold a few.
	time.Sleep(200 * time.Millisecond)
	wantFrames := len(utterance(t, answer, 48000)) / (48000 / 50)
	if got := c.audibleFrames(1); got < wantFrames/2 || got > wantFrames*3/2 {
		t.Errorf("%d audible answer frames, want about %d", got, wantFrames)
	} else {
		t.Logf("answer: %d audible frames (%d ms), flite's utterance %d frames", got, got*FrameMs, wantFrames)
	}
	checkTraceOrder(t, trace)
	checkRTPPace(t, c)
	if _, ok := trace.Marks[pipeline.MarkPlaybackStart]; !ok {
		t.Errorf("trace lacks playback_start (sent over the data channel): %v", trace.Marks)
	}
	if trace.VoiceToVoiceMs == nil || *trace.VoiceToVoiceMs <= 0 {
		t.Errorf("trace without a positive voice_to_voice_ms: %+v", trace)
	} else {
		t.Logf("webrtc: voice-to-voice %.0f ms; marks %v", *trace.VoiceToVoiceMs, trace.Marks)
	}
	if n := ts.srv.ActiveSessions(); n != 1 {
		t.Errorf("%d active sessions, want 1", n)
	}
	// The client hangs up without a stop: the server's session ends.
	c.close()
	waitIdle(t, ts.srv)
}

// TestRTCBargeIn speaks over a long answer over WebRTC: the server sends
// interrupted, and the answer's audio stops with it (the writer drops the
// frames it held back for the stream's pace; with the pacer's 60 ms lead
// that is a frame or two, so the bound only catches a writer that keeps
// sending).
func TestRTCBargeIn(t *testing.T) {
	checkLeaks(t)
	const long = "Once upon a time there was a little robot who loved to sing. " +
		"Every morning it climbed the hill behind the village and sang to the sun. " +
		"The birds came to listen, and the farmers stopped their work to hear it."
	ts := rtcTestServer(t, []string{long, "Okay."}, nil)
	c := newRTCClient(t, ts.http.URL)
	c.until("ready", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	c.speech <- utterance(t, "tell me a story", 48000)
	deadline := time.Now().Add(30 * time.Second)
	for c.audibleFrames(1) < 25 { // half a second of the answer
		if time.Now().After(deadline) {
			t.Fatalf("%d audible answer frames after 30 s", c.audibleFrames(1))
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.speech <- utterance(t, "stop please wait", 48000)
	c.until("interrupted", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventInterrupted })
	cut := time.Now()
	c.until("trace of turn 1", traceOf(1))
	c.mu.Lock()
	var late []float64
	for _, a := range c.arrivals {
		if a.audible && a.at.After(cut) && a.at.Before(cut.Add(400*time.Millisecond)) {
			late = append(late, float64(a.at.Sub(cut))/float64(time.Millisecond))
		}
	}
	c.mu.Unlock()
	// The barge-in speech's own answer comes after its end of turn, well
	// past 400 ms; a packet in flight at the cut may arrive just after it.
	if len(late) > 0 && late[len(late)-1] > 200 {
		t.Errorf("audible packets arrived %v ms after the interrupted event", late)
	} else {
		t.Logf("audible packets %v ms after the interrupted event", late)
	}
	c.close()
	waitIdle(t, ts.srv)
}

// TestRTCStop ends a session with a stop message on the data channel, after
// the control rules every transport shares: one start is accepted (the
// offer set the format), a second is bad_message, an unknown type is
// unknown_type.
func TestRTCStop(t *testing.T) {
	checkLeaks(t)
	ts := rtcTestServer(t, nil, nil)
	c := newRTCClient(t, ts.http.URL)
	c.until("ready", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	c.send(map[string]any{"type": "start", "sample_rate": 48000, "encoding": "opus"})
	c.send(map[string]any{"type": "start", "sample_rate": 48000, "encoding": "opus"})
	c.send(map[string]any{"type": "bogus"})
	for _, want := range []string{pipeline.CodeBadMessage, pipeline.CodeUnknownType} {
		select {
		case ev := <-c.events:
			if ev.Type != pipeline.EventError || ev.Code != want {
				t.Errorf("have %+v, want a %s error", ev, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s error event within 30 s", want)
		}
	}
	c.send(map[string]any{"type": "stop"})
	waitIdle(t, ts.srv)
}

// TestRTCBusy shares the session limit with the WebSocket: a WebRTC offer
// while a WebSocket session holds the only slot gets HTTP 503, and bad
// offers get 400.
func TestRTCBusy(t *testing.T) {
	checkLeaks(t)
	ts := rtcTestServer(t, nil, func(cfg *Config) { cfg.MaxSessions = 1 })
	ws := dial(t, ts.url)
	sendJSON(t, ws, startMsg(16000, EncodingPCM16))
	expectReady(t, ws)

	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.CreateDataChannel(rtcEventsLabel, nil); err != nil {
		t.Fatal(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(offer)
	resp, err := http.Post(ts.http.URL+"/rtc/offer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ev pipeline.Event
	_ = json.NewDecoder(resp.Body).Decode(&ev)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || ev.Code != pipeline.CodeBusy || resp.Header.Get("Retry-After") == "" {
		t.Errorf("full server answered HTTP %d %+v (Retry-After %q), want 503 busy", resp.StatusCode, ev, resp.Header.Get("Retry-After"))
	}
	for _, bad := range []string{`not json`, `{"type":"answer","sdp":"v=0"}`, `{"type":"offer","sdp":""}`,
		`{"type":"offer","sdp":"v=0","device":"` + strings.Repeat("d", pipeline.MaxDeviceIDBytes+1) + `"}`} {
		resp, err := http.Post(ts.http.URL+"/rtc/offer", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("offer %q answered HTTP %d, want 400", bad, resp.StatusCode)
		}
	}
	stopAndExpectClose(t, ws)
	waitIdle(t, ts.srv)
	_ = pc.Close()
}

// TestRTCPeerVanishes cuts the client's network after the session started
// (no close of any kind reaches the server): ICE fails and the session
// ends with every goroutine.
func TestRTCPeerVanishes(t *testing.T) {
	checkLeaks(t)
	ts := rtcTestServer(t, nil, func(cfg *Config) { cfg.RTC.FailedTimeout = 2 * time.Second })
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	mux := webrtc.NewICEUDPMux(nil, udp)
	c := newRTCClientWith(t, ts.http.URL, func(se *webrtc.SettingEngine) {
		se.SetICEUDPMux(mux)
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	})
	c.until("ready", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	_ = mux.Close() // the client's only socket: nothing more goes either way
	_ = udp.Close()
	waitIdle(t, ts.srv)
	c.close()
}

// TestRTCNeverConnects posts an offer and never uses the answer: the
// session gives up after ConnectTimeout.
func TestRTCNeverConnects(t *testing.T) {
	checkLeaks(t)
	ts := rtcTestServer(t, nil, func(cfg *Config) { cfg.RTC.ConnectTimeout = time.Second })
	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.CreateDataChannel(rtcEventsLabel, nil); err != nil {
		t.Fatal(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	postOffer(t, ts.http.URL, offer, http.StatusOK)
	if n := ts.srv.ActiveSessions(); n != 1 {
		t.Errorf("%d active sessions after the answer, want 1", n)
	}
	waitIdle(t, ts.srv)
	_ = pc.Close()
}

// TestRTCConfig serves the configured ICE servers to the page.
func TestRTCConfig(t *testing.T) {
	ts := rtcTestServer(t, nil, func(cfg *Config) {
		cfg.RTC.ICEServers = []ICEServer{{URLs: []string{"stun:stun.example.org:3478"}}}
	})
	resp, err := http.Get(ts.http.URL + "/rtc/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		ICEServers []ICEServer `json:"ice_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.ICEServers) != 1 || got.ICEServers[0].URLs[0] != "stun:stun.example.org:3478" {
		t.Errorf("/rtc/config gave %+v", got)
	}
}
