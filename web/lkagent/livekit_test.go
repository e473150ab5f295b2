package lkagent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	lkp "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"
	"github.com/rs/zerolog"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// LiveKitVersion is the livekit-server the tests run (make livekit-server
// builds it into build/livekit-server-<version>/).
const LiveKitVersion = "v1.13.5"

const (
	testKey    = "devkey"
	testSecret = "voxpipe-test-secret-of-32-bytes-at-least"
)

// liveKit is a livekit-server process on loopback.
type liveKit struct {
	url string // ws://127.0.0.1:port
	pid int

	mu   sync.Mutex // guards logs
	logs *strings.Builder
}

// logged says whether the server's log has a line holding every one of
// parts.
func (lk *liveKit) logged(parts ...string) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	for _, line := range strings.Split(lk.logs.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// freePort returns a port free on loopback for network ("tcp" or "udp").
func freePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startLiveKit starts livekit-server in dev mode on loopback, or skips the
// test when the binary is absent.
func startLiveKit(t testing.TB) *liveKit {
	t.Helper()
	return startLiveKitWith(t, "")
}

// startLiveKitWith is startLiveKit with extra YAML appended to the config
// (redis: for a node of several).
func startLiveKitWith(t testing.TB, extra string) *liveKit {
	t.Helper()
	bin := os.Getenv("VOXPIPE_LIVEKIT_SERVER")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(t), "build", "livekit-server-"+LiveKitVersion, "livekit-server")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("livekit-server not found at %s (make livekit-server builds it): %v", bin, err)
	}
	port, udp, tcp := freePort(t, "tcp"), freePort(t, "udp"), freePort(t, "tcp")
	conf := fmt.Sprintf(`port: %d
bind_addresses: ["127.0.0.1"]
rtc:
  udp_port: %d
  tcp_port: %d
  use_external_ip: false
  node_ip: 127.0.0.1
  enable_loopback_candidate: true
keys:
  %s: %s
logging:
  level: info
`, port, udp, tcp, testKey, testSecret) + extra
	cmd := exec.Command(bin, "--config-body", conf)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start livekit-server: %v", err)
	}
	lk := &liveKit{url: fmt.Sprintf("ws://127.0.0.1:%d", port), pid: cmd.Process.Pid, logs: &strings.Builder{}}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lk.mu.Lock()
			lk.logs.WriteString(sc.Text() + "\n")
			lk.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-logged
		if t.Failed() {
			lk.mu.Lock()
			t.Logf("livekit-server %s log:\n%s", lk.url, tail(lk.logs.String(), 6000))
			lk.mu.Unlock()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return lk
		}
		if time.Now().After(deadline) {
			t.Fatalf("livekit-server did not listen on %d within 30 s", port)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var (
	enginesOnce sync.Once
	engineASR   *asrsphinx.Recognizer
	engineTTS   *ttsflite.Synthesizer
	enginesErr  error
)

func engines(t testing.TB) (*asrsphinx.Recognizer, *ttsflite.Synthesizer) {
	t.Helper()
	enginesOnce.Do(func() {
		if engineASR, enginesErr = asrsphinx.New(asrsphinx.DefaultConfig()); enginesErr == nil {
			engineTTS, enginesErr = ttsflite.New(ttsflite.DefaultConfig())
		}
	})
	if enginesErr != nil {
		t.Skipf("engines unavailable (requires cgo, pocketsphinx-en-us and flite1-dev): %v", enginesErr)
	}
	return engineASR, engineTTS
}

// speech is text spoken by flite at 48 kHz after 0.3 s of silence.
func speech(t testing.TB, synth tts.Synthesizer, text string) []int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := make(chan tts.Chunk, 64)
	errc := make(chan error, 1)
	go func() { errc <- synth.Synthesize(ctx, text, ch); close(ch) }()
	var pcm []int16
	for c := range ch {
		pcm = append(pcm, c.PCM...)
	}
	if err := <-errc; err != nil {
		t.Fatalf("synthesize %q: %v", text, err)
	}
	r, err := audio.NewResampler(synth.SampleRate(), rate)
	if err != nil {
		t.Fatal(err)
	}
	up := append([]int16(nil), r.Process(nil, append(pcm, make([]int16, 64)...))...)
	return append(make([]int16, rate*3/10), up...)
}

func testLogger(t testing.TB) zerolog.Logger {
	if testing.Verbose() {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

// startWorker runs a worker on lk until the test ends and waits for its
// registration.
func startWorker(t testing.TB, lk *liveKit, edit func(*Config)) (*Worker, context.CancelFunc, <-chan error) {
	t.Helper()
	rec, synth := engines(t)
	cfg := Config{URL: lk.url, APIKey: testKey, APISecret: testSecret, MaxJobs: 2, Version: "test", Pipeline: pipeline.DefaultConfig()}
	cfg.Pipeline.SystemPrompt = "You are a test."
	if edit != nil {
		edit(&cfg)
	}
	w, err := New(cfg, pipeline.Backends{ASR: rec, LLM: sessiontest.LLM{Answer: "It is sunny today."}, TTS: synth}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		done <- w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(60 * time.Second):
			t.Error("worker did not stop within 60 s")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.mu.Lock()
		id := w.id
		w.mu.Unlock()
		if id != "" {
			return w, cancel, done
		}
		select {
		case err := <-done:
			t.Fatalf("worker ended before registering: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("worker not registered within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listener plays an agent's answer track the way a browser would: it
// decodes the Opus packets, counts the audible ones per turn (the turn of
// the latest answer event), reports playback_start on a turn's first
// audible packet through report, and collects the events.
type listener struct {
	t      testing.TB
	events chan pipeline.Event
	report func(msg []byte) // sends one control message to the agent

	mu         sync.Mutex // guards the fields below
	turn       int        // the turn whose answer is being spoken
	audible    map[int]int
	firstHeard map[int]time.Time
	played     map[int]bool
}

func newListener(t testing.TB) *listener {
	return &listener{t: t, events: make(chan pipeline.Event, 1024), audible: map[int]int{}, firstHeard: map[int]time.Time{}, played: map[int]bool{}}
}

// onEvent takes one JSON event.
func (l *listener) onEvent(payload []byte) {
	var ev pipeline.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		l.t.Errorf("agent event not JSON: %v: %q", err, payload)
		return
	}
	if ev.Type == pipeline.EventAnswer {
		l.mu.Lock()
		l.turn = ev.Turn
		l.mu.Unlock()
	}
	select {
	case l.events <- ev:
	default:
		l.t.Error("listener's event buffer full")
	}
}

// play reads the answer track to its end.
func (l *listener) play(track *webrtc.TrackRemote) {
	if track.Kind() != webrtc.RTPCodecTypeAudio {
		return
	}
	dec, err := audio.NewOpusDecoder(rate)
	if err != nil {
		l.t.Error(err)
		return
	}
	pcm := make([]int16, rate*120/1000)
	buf := make([]byte, rtpBuf)
	var pkt rtp.Packet
	for {
		n, _, err := track.Read(buf)
		if err != nil {
			return
		}
		if pkt.Unmarshal(buf[:n]) != nil || len(pkt.Payload) == 0 {
			continue
		}
		m, err := dec.Decode(pkt.Payload, pcm)
		if err != nil || rms(pcm[:m]) < 300 {
			continue
		}
		l.mu.Lock()
		turn := l.turn
		l.audible[turn]++
		send := turn > 0 && !l.played[turn]
		if send {
			l.played[turn] = true
			l.firstHeard[turn] = time.Now()
		}
		l.mu.Unlock()
		if send {
			msg, _ := json.Marshal(pipeline.ClientEvent{Type: pipeline.ClientPlaybackStart, Turn: turn})
			l.report(msg)
		}
	}
}

// heard returns the audible packets of turn and when the first arrived.
func (l *listener) heard(turn int) (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.audible[turn], l.firstHeard[turn]
}

// waitEvent returns the first event that match accepts, failing after d.
func (l *listener) waitEvent(d time.Duration, what string, match func(pipeline.Event) bool) pipeline.Event {
	l.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-l.events:
			if ev.Type == pipeline.EventError {
				l.t.Logf("agent error event: %s: %s", ev.Code, ev.Message)
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			l.t.Fatalf("no %s within %s", what, d)
			return pipeline.Event{}
		}
	}
}

func rms(pcm []int16) float64 {
	if len(pcm) == 0 {
		return 0
	}
	var sum float64
	for _, s := range pcm {
		sum += float64(s) * float64(s)
	}
	return math.Sqrt(sum / float64(len(pcm)))
}

// say streams pcm through write as 20 ms Opus packets at real-time pace,
// then tailMs of silence; it returns when the speech's last packet went
// out (the person's last word, for heard latency at the client).
func say(t testing.TB, write func(media.Sample) error, pcm []int16, tailMs int) (spoken time.Time) {
	t.Helper()
	enc, err := audio.NewOpusEncoder(rate, 32000)
	if err != nil {
		t.Fatal(err)
	}
	frame := rate / 1000 * 20
	speechEnd := len(pcm)
	pcm = append(append([]int16(nil), pcm...), make([]int16, rate/1000*tailMs)...)
	packet := make([]byte, audio.MaxOpusPacket)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for off := 0; off+frame <= len(pcm); off += frame {
		n, err := enc.Encode(pcm[off:off+frame], packet)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(media.Sample{Data: append([]byte(nil), packet[:n]...), Duration: 20 * time.Millisecond}); err != nil {
			t.Errorf("mic write: %v", err)
			return spoken
		}
		if off < speechEnd && off+frame >= speechEnd {
			spoken = time.Now()
		}
		<-tick.C
	}
	return spoken
}

// caller is a LiveKit participant: it publishes a microphone and listens
// to the agent (answer track, events on EventsTopic, reports on
// ControlTopic).
type caller struct {
	*listener
	room *lksdk.Room
	mic  *lksdk.LocalTrack
}

func joinCaller(t testing.TB, lk *liveKit, roomName, identity string) *caller {
	t.Helper()
	at := auth.NewAccessToken(testKey, testSecret)
	at.SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: roomName}).SetIdentity(identity).SetValidFor(time.Hour)
	token, err := at.ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{listener: newListener(t)}
	c.report = func(msg []byte) {
		_ = c.room.LocalParticipant.PublishDataPacket(&lksdk.UserDataPacket{Payload: msg, Topic: ControlTopic}, lksdk.WithDataPublishReliable(true))
	}
	cb := lksdk.NewRoomCallback()
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		c.play(track)
	}
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if u, ok := data.(*lksdk.UserDataPacket); ok && u.Topic == EventsTopic {
			c.onEvent(u.Payload)
		}
	}
	c.room, err = lksdk.ConnectToRoomWithToken(lk.url, token, cb, lksdk.WithAutoSubscribe(true))
	if err != nil {
		t.Fatalf("caller join: %v", err)
	}
	t.Cleanup(c.room.Disconnect)
	c.mic, err = lksdk.NewLocalTrack(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rate, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.room.LocalParticipant.PublishTrack(c.mic, &lksdk.TrackPublicationOptions{Name: "mic", Source: lkp.TrackSource_MICROPHONE}); err != nil {
		t.Fatalf("publish mic: %v", err)
	}
	return c
}

// say speaks pcm on the microphone (see the function say).
func (c *caller) say(pcm []int16, tailMs int) time.Time {
	return say(c.t, func(s media.Sample) error { return c.mic.WriteSample(s, nil) }, pcm, tailMs)
}

// TestAgentAnswersInARoom: a participant joins a room of a real
// livekit-server, the worker is dispatched to it, hears the spoken
// question on the participant's microphone track (pocketsphinx), and
// answers on its own audio track (flite), with the transcript, the answer
// and the latency trace as data packets.
func TestAgentAnswersInARoom(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts livekit-server and speaks a real turn")
	}
	lk := startLiveKit(t)
	_, synth := engines(t)
	question := speech(t, synth, "what is the weather like today")
	w, _, _ := startWorker(t, lk, nil)

	c := joinCaller(t, lk, "room-answer", "caller")
	c.waitEvent(30*time.Second, "ready event from the dispatched agent", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	if n := w.Jobs(); n != 1 {
		t.Errorf("worker holds %d jobs, want 1", n)
	}
	c.say(question, 1500)
	final := c.waitEvent(30*time.Second, "final transcript", func(ev pipeline.Event) bool {
		return ev.Type == pipeline.EventTranscript && ev.Final
	})
	if !strings.Contains(final.Text, "weather") {
		t.Errorf("final transcript %q, want the word weather", final.Text)
	}
	var answer strings.Builder
	c.waitEvent(30*time.Second, "final answer", func(ev pipeline.Event) bool {
		if ev.Type == pipeline.EventAnswer {
			answer.WriteString(ev.Text)
		}
		return ev.Type == pipeline.EventAnswer && ev.Final
	})
	trace := c.waitEvent(30*time.Second, "trace", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace })
	audible, _ := c.heard(trace.Turn)
	t.Logf("turn %d: heard %q, answered %q; %d audible answer packets; v2v %v ms, heard %v ms, marks %v",
		trace.Turn, final.Text, answer.String(), audible, deref(trace.VoiceToVoiceMs), deref(trace.HeardMs), trace.Marks)
	if audible < 10 {
		t.Errorf("heard %d audible packets of the answer, want a spoken sentence (10+)", audible)
	}
	if !strings.Contains(answer.String(), "sunny") {
		t.Errorf("answer %q, want the scripted one", answer.String())
	}
	if trace.VoiceToVoiceMs == nil {
		t.Error("trace without voice_to_voice_ms")
	}
	if _, ok := trace.Marks[pipeline.MarkPlaybackStart]; !ok {
		t.Errorf("trace has no %s: the caller's report on the control topic was not taken (marks %v)", pipeline.MarkPlaybackStart, trace.Marks)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// TestFullWorkerGetsNoJob: two workers of one slot each and two rooms:
// the first worker to take a room reports itself full, so the second
// room goes to the other worker, and a third room, with both full, gets
// no agent at all.
func TestFullWorkerGetsNoJob(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts livekit-server")
	}
	lk := startLiveKit(t)
	one := func(c *Config) { c.MaxJobs = 1 }
	w1, _, _ := startWorker(t, lk, one)
	w2, _, _ := startWorker(t, lk, one)
	ready := func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady }

	a := joinCaller(t, lk, "room-a", "caller-a")
	a.waitEvent(30*time.Second, "ready in room-a", ready)
	b := joinCaller(t, lk, "room-b", "caller-b")
	b.waitEvent(30*time.Second, "ready in room-b", ready)
	if j1, j2 := w1.Jobs(), w2.Jobs(); j1 != 1 || j2 != 1 {
		t.Fatalf("jobs per worker %d and %d, want 1 and 1 (a full worker took a second job, or one got none)", j1, j2)
	}
	c := joinCaller(t, lk, "room-c", "caller-c")
	select {
	case ev := <-c.events:
		t.Fatalf("room-c got an agent event (%s) with every worker full", ev.Type)
	case <-time.After(5 * time.Second):
	}
	if j1, j2 := w1.Jobs(), w2.Jobs(); j1 != 1 || j2 != 1 {
		t.Errorf("after a third room: jobs per worker %d and %d, want 1 and 1", j1, j2)
	}
}

// TestDrainFinishesTheTurn: the worker is stopped (as by SIGTERM, no
// drain time) while a turn is in flight: the turn is answered to its end,
// trace included, and only then does the agent leave and Run return.
func TestDrainFinishesTheTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts livekit-server and speaks a real turn")
	}
	lk := startLiveKit(t)
	_, synth := engines(t)
	question := speech(t, synth, "what is the weather like today")
	w, stop, done := startWorker(t, lk, nil)
	c := joinCaller(t, lk, "room-drain", "caller")
	c.waitEvent(30*time.Second, "ready event", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	go c.say(question, 1500)
	c.waitEvent(30*time.Second, "speech_end", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventSpeechEnd })
	stop()
	trace := c.waitEvent(30*time.Second, "the in-flight turn's trace after the stop", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace })
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after the turn (jobs %d)", w.Jobs())
	}
	audible, _ := c.heard(trace.Turn)
	if trace.Interrupted || audible < 10 {
		t.Errorf("turn %d: interrupted %v, %d audible packets: the drain cut the turn", trace.Turn, trace.Interrupted, audible)
	}
	if n := w.Jobs(); n != 0 {
		t.Errorf("%d jobs left after Run returned", n)
	}
}

// TestAgentBargeIn: the caller speaks again while the agent's answer
// plays; the agent cuts its answer (interrupted), stops its audio, and
// answers the new question, as on the other transports.
func TestAgentBargeIn(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts livekit-server and speaks real turns")
	}
	lk := startLiveKit(t)
	rec, synth := engines(t)
	question := speech(t, synth, "what is the weather like today")
	long := "It is sunny today, and it will stay sunny and warm all through the week, with a light breeze from the west in the afternoons."
	w, err := New(Config{URL: lk.url, APIKey: testKey, APISecret: testSecret, MaxJobs: 1, Pipeline: pipeline.DefaultConfig()},
		pipeline.Backends{ASR: rec, LLM: sessiontest.LLM{Answer: long}, TTS: synth}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for registered := false; !registered; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		registered = w.id != ""
		w.mu.Unlock()
	}

	c := joinCaller(t, lk, "room-barge", "caller")
	c.waitEvent(30*time.Second, "ready event", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	// The question, then the same question again 1.5 s after it ended:
	// the answer (about 8 s) starts some 0.5 s after the first, so the
	// second comes over it. One stream, as a microphone sends.
	twice := append(append(append([]int16(nil), question...), make([]int16, rate*3/2)...), question...)
	c.say(twice, 1500)
	cut := c.waitEvent(30*time.Second, "interrupted event", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventInterrupted })
	heardAtCut, _ := c.heard(cut.Turn)
	tr := c.waitEvent(30*time.Second, "trace of the cut turn", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace && ev.Turn == cut.Turn })
	if !tr.Interrupted {
		t.Errorf("turn %d's trace not marked interrupted", cut.Turn)
	}
	// The next turn is answered (its audio heard; no need to wait for
	// the whole long answer).
	next := cut.Turn + 1
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := c.heard(next); n >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %d after the barge-in not heard within 30 s", next)
		}
	}
	n1, _ := c.heard(cut.Turn)
	t.Logf("turn %d cut after %d audible packets (%d in all); turn %d heard", cut.Turn, heardAtCut, n1, next)
	// The whole answer is ~8 s (400 packets): a cut one stops far short.
	if n1 > 200 {
		t.Errorf("turn %d: %d audible packets, the answer played on after the cut", cut.Turn, n1)
	}
}

// startRedis starts redis-server on loopback for the test, or skips it.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not found (Debian package redis-server): ", err)
	}
	port := freePort(t, "tcp")
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 10 s", addr)
		}
	}
}

// TestTwoNodes: two livekit-server nodes share a Redis; the worker
// registers with the first, the caller joins through the second, which
// hosts the room (region-aware placement puts a room on the node nearest
// the one asked). The job request crosses to the worker's node over Redis,
// the agent's media goes to the room's node, and the caller is answered.
func TestTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: starts redis-server, two livekit-server nodes and speaks a real turn")
	}
	redis := startRedis(t)
	node := func(region string) string {
		return "redis:\n  address: " + redis + "\nregion: " + region + `
node_selector:
  kind: regionaware
  regions:
    - name: one
      lat: 10
      lon: 10
    - name: two
      lat: 50
      lon: 50
`
	}
	lk1 := startLiveKitWith(t, node("one"))
	lk2 := startLiveKitWith(t, node("two"))
	_, synth := engines(t)
	question := speech(t, synth, "what is the weather like today")
	startWorker(t, lk1, nil)

	c := joinCaller(t, lk2, "room-two-nodes", "caller")
	c.waitEvent(30*time.Second, "ready from the agent registered on the other node", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	c.say(question, 1500)
	final := c.waitEvent(30*time.Second, "final transcript", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTranscript && ev.Final })
	trace := c.waitEvent(30*time.Second, "trace", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventTrace })
	n, _ := c.heard(trace.Turn)
	t.Logf("caller and room on node 2, worker on node 1: heard %q, %d audible answer packets, v2v %v ms", final.Text, n, deref(trace.VoiceToVoiceMs))
	if !strings.Contains(final.Text, "weather") || n < 10 {
		t.Errorf("transcript %q, %d audible packets: want the question heard and answered", final.Text, n)
	}
	if !lk2.logged("starting RTC session", "room-two-nodes", "voxpipe-agent-") {
		t.Error("the agent's session is not on node 2, the room's node: the test did not cross nodes")
	}
	if lk1.logged("starting RTC session", "room-two-nodes") {
		t.Error("node 1 hosts a session of the room: the room was not placed on node 2")
	}
}
