package lkagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	lkp "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

const (
	// rate is the Opus clock and the session's audio rate both ways.
	rate = 48000
	// inputQueue bounds the session's input (as the web transports').
	inputQueue = 64
	// rtpBuf holds one RTP packet.
	rtpBuf = 1500
	// maxGap is the longest pause filled with silence (DTX pauses; past
	// it the microphone stopped: muted, or gone).
	maxGap = 2 * time.Second
	// dtxWait: a read that waits this long queues the silence since the
	// last packet.
	dtxWait = 60 * time.Millisecond
	// dtxBytes: an Opus packet this short is a DTX (silence) frame; speech
	// takes tens of bytes a frame.
	dtxBytes = 3
	// silenceChunk: silence is queued 100 ms at a time at most.
	silenceChunk = rate / 10
)

// opusSamples is how many 48 kHz samples an Opus packet holds, from its
// TOC byte (RFC 6716, section 3.1); 0 when it cannot tell.
func opusSamples(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	config := int(p[0] >> 3)
	var frame int
	switch {
	case config < 12: // SILK: 10, 20, 40, 60 ms
		frame = [4]int{480, 960, 1920, 2880}[config%4]
	case config < 16: // hybrid: 10, 20 ms
		frame = [2]int{480, 960}[config%2]
	default: // CELT: 2.5, 5, 10, 20 ms
		frame = [4]int{120, 240, 480, 960}[config%4]
	}
	switch p[0] & 3 {
	case 0:
		return frame
	case 1, 2:
		return 2 * frame
	}
	if len(p) < 2 {
		return 0
	}
	return int(p[1]&0x3f) * frame
}

// job is one dispatched conversation: the agent in one room, one session
// on the first remote microphone it hears.
//
// Goroutines: run owns the room connection, the session goroutine (which
// closes out) and the writer (out's only reader). The SDK runs onTrack
// (which starts the one microphone reader, the only sender of audio on
// in) and onData (control input). in is never closed: its senders are SDK
// callbacks, so the session ends through ctx.
type job struct {
	w       *Worker
	info    *lkp.Job
	session string
	url     string
	token   string
	log     zerolog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	in  chan pipeline.Input
	out chan pipeline.Output

	room  *lksdk.Room
	track *lksdk.LocalTrack

	obs pipeline.Observer // set before started

	micOnce  sync.Once
	micReady chan struct{} // closed when the microphone reader starts
	started  atomic.Bool   // the session runs: audio is forwarded

	rules voice.NegotiatedRules // the SDK may run data callbacks concurrently

	// turnOpen: a turn is in flight (words heard, its trace not yet sent);
	// finishing: leave the room once no turn is in flight.
	turnOpen  atomic.Bool
	finishing atomic.Bool

	mu       sync.Mutex // guards speaker, closed and readers.Add
	speaker  string     // identity of the participant the session listens to
	closed   bool
	readers  sync.WaitGroup
	failOnce sync.Once
	failErr  error
}

func newJob(w *Worker, info *lkp.Job, url, token string) *job {
	j := &job{
		w:        w,
		info:     info,
		session:  "lk-" + info.GetId(),
		url:      url,
		token:    token,
		in:       make(chan pipeline.Input, inputQueue),
		out:      make(chan pipeline.Output),
		micReady: make(chan struct{}),
		obs:      nopObserver{},
	}
	j.log = w.log.With().Str("transport", "livekit").Str("job", info.GetId()).Str("room", info.GetRoom().GetName()).Logger()
	j.ctx, j.cancel = context.WithCancel(context.Background())
	return j
}

// fail records the job's first failure and ends it.
func (j *job) fail(err error) {
	j.failOnce.Do(func() { j.failErr = err })
	j.cancel()
}

// finish ends the job after its current turn (the drain's deadline).
func (j *job) finish() {
	j.finishing.Store(true)
	if !j.started.Load() {
		j.cancel() // no conversation yet: nothing to finish
	}
}

// run joins the room, waits for a microphone, runs the session to its
// end and leaves. Its error, if any, is the job's failure.
func (j *job) run() error {
	defer j.cancel()
	cb := lksdk.NewRoomCallback()
	cb.OnTrackSubscribed = j.onTrack
	cb.OnDataPacket = j.onData
	cb.OnDisconnected = j.cancel
	cb.OnParticipantDisconnected = func(rp *lksdk.RemoteParticipant) {
		j.mu.Lock()
		gone := j.speaker != "" && rp.Identity() == j.speaker
		j.mu.Unlock()
		if gone {
			j.log.Info().Str("participant", rp.Identity()).Msg("livekit speaker left: ending the job")
			j.cancel()
		}
	}
	j.room = lksdk.NewRoom(cb)
	if err := j.room.JoinWithContextAndToken(j.ctx, j.url, j.token, lksdk.WithAutoSubscribe(true)); err != nil {
		return fmt.Errorf("lkagent: join room %q: %w", j.info.GetRoom().GetName(), err)
	}
	defer j.leave()
	var err error
	j.track, err = lksdk.NewLocalTrack(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rate, Channels: 2})
	if err != nil {
		return fmt.Errorf("lkagent: answer track: %w", err)
	}
	if _, err := j.room.LocalParticipant.PublishTrack(j.track, &lksdk.TrackPublicationOptions{
		Name: "voxpipe-answer", Source: lkp.TrackSource_MICROPHONE,
	}); err != nil {
		return fmt.Errorf("lkagent: publish answer track: %w", err)
	}
	j.log.Info().Msg("livekit job joined the room; waiting for a microphone")

	timer := time.NewTimer(j.w.cfg.MicWait)
	defer timer.Stop()
	select {
	case <-j.micReady:
	case <-timer.C:
		return fmt.Errorf("lkagent: no microphone track in the room within %s", j.w.cfg.MicWait)
	case <-j.ctx.Done():
		return j.failErr
	}

	cfg := j.w.cfg.Pipeline
	cfg.InputRate, cfg.OutputRate = rate, rate
	if j.w.cfg.Observer != nil {
		j.obs = j.w.cfg.Observer(j.session)
	}
	sess, p := voice.Start(j.session, cfg, j.w.be, j.obs, j.w.log.With().Str("transport", "livekit").Logger())
	if p != nil {
		j.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: p.Code, Message: p.Message})
		return fmt.Errorf("lkagent: session: %w", p)
	}
	wr, err := newWriter(j)
	if err != nil {
		return fmt.Errorf("lkagent: answer encoder: %w", err)
	}
	j.rules.Running()
	j.sendEvent(pipeline.Event{Type: pipeline.EventReady, Encoding: voice.EncodingOpus, SampleRate: rate, FrameMs: voice.FrameMs})
	j.started.Store(true)
	j.w.jobRunning(j.info.GetId())
	j.log.Info().Str("session", j.session).Msg("livekit session started")
	runErr := make(chan error, 1)
	go func() {
		defer close(j.out)
		runErr <- voice.Run(j.ctx, sess, j.in, j.out, j.log)
	}()
	wr.loop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		j.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: err.Error()})
		return fmt.Errorf("lkagent: session: %w", err)
	}
	j.log.Info().Str("session", j.session).Msg("livekit session ended")
	return j.failErr
}

// leave disconnects from the room and waits for the microphone reader.
func (j *job) leave() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.cancel()
	j.room.Disconnect()
	j.readers.Wait()
}

// onTrack takes the first remote audio track as the session's microphone.
func (j *job) onTrack(track *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if track.Kind() != webrtc.RTPCodecTypeAudio {
		return
	}
	first := false
	j.micOnce.Do(func() { first = true })
	if !first {
		j.log.Debug().Str("participant", rp.Identity()).Msg("livekit: the session already has a microphone; ignoring another audio track")
		return
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.speaker = rp.Identity()
	j.readers.Add(1)
	j.mu.Unlock()
	j.log.Info().Str("participant", rp.Identity()).Str("codec", track.Codec().MimeType).Msg("livekit microphone subscribed")
	go func() {
		defer j.readers.Done()
		j.readMic(track)
	}()
}

// readMic decodes the microphone's Opus packets into the session's input
// (audio read before the session starts is dropped: nothing listens yet).
func (j *job) readMic(track *webrtc.TrackRemote) {
	up, err := voice.NewUplink(j.in, voice.EncodingOpus, rate)
	if err != nil {
		j.fail(fmt.Errorf("lkagent: opus decoder: %w", err))
		return
	}
	close(j.micReady)
	buf := make([]byte, rtpBuf)
	var pkt rtp.Packet
	// livekit-client publishes with Opus DTX: in a pause the browser sends
	// a packet every 400 ms or so and the RTP clock jumps. The session must
	// hear the silence a pause stands for as it passes, or its end of
	// speech waits for the next packet (2 s where 0.5 s was due). So,
	// after a DTX frame, a read that waits past dtxWait queues the silence
	// up to now, and a packet whose RTP time jumps ahead queues what is
	// still missing. (Only after a DTX frame: a speech packet that comes
	// late must not get silence put before it.)
	var next uint32      // the RTP time the next packet should carry
	var lastEnd uint32   // the RTP time where the last packet ended
	var lastAt time.Time // when it arrived
	have := false
	quiet := false // the last packet was a DTX frame: a pause has begun
	fill := func(samples int32) bool {
		for samples > 0 {
			k := min(samples, silenceChunk)
			if up.WriteSilence(j.ctx, int(k)) != nil {
				return false
			}
			samples -= k
			next += uint32(k)
		}
		return true
	}
	for {
		_ = track.SetReadDeadline(time.Now().Add(dtxWait))
		n, _, err := track.Read(buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) || j.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if have && quiet && j.started.Load() && time.Since(lastAt) < maxGap {
					// Silence due by now, less what was already queued.
					due := int32(time.Since(lastAt).Milliseconds()*rate/1000) - int32(next-lastEnd)
					if due >= silenceChunk/5 && !fill(due) {
						return
					}
				}
				continue
			}
			continue // one bad packet; the web transport counts these
		}
		if !j.started.Load() || pkt.Unmarshal(buf[:n]) != nil || len(pkt.Payload) == 0 {
			continue
		}
		if gap := int32(pkt.Timestamp - next); have && gap > 0 && gap <= int32(maxGap/time.Millisecond)*rate/1000 {
			if !fill(gap) {
				return
			}
		}
		if d := opusSamples(pkt.Payload); d > 0 {
			next, have = pkt.Timestamp+uint32(d), true
			lastEnd, lastAt = next, time.Now()
			quiet = len(pkt.Payload) <= dtxBytes
		}
		switch queued, p := up.Write(pkt.Payload); {
		case p != nil:
			j.log.Debug().Str("code", p.Code).Str("reason", p.Message).Msg("livekit: microphone packet rejected")
		case !queued:
			j.obs.FrameDropped("input_full")
		}
	}
}

// onData takes the speaker's control message.
func (j *job) onData(data lksdk.DataPacket, params lksdk.DataReceiveParams) {
	u, ok := data.(*lksdk.UserDataPacket)
	if !ok || u.Topic != ControlTopic {
		return
	}
	// Only the person the session listens to controls it: another
	// participant must not stop or interrupt their conversation.
	j.mu.Lock()
	speaker := j.speaker
	j.mu.Unlock()
	if params.SenderIdentity != speaker {
		j.log.Debug().Str("from", params.SenderIdentity).Msg("livekit control message from another participant ignored")
		return
	}
	switch ev, p := j.rules.Parse(u.Payload); { // the room negotiated the format
	case p != nil:
		j.log.Debug().Str("from", params.SenderIdentity).Str("code", p.Code).Str("reason", p.Message).Msg("livekit control message rejected")
		j.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: p.Code, Message: p.Message})
	case ev != nil:
		voice.Forward(j.ctx, j.in, ev)
	}
}

// sendEvent publishes one event as a reliable data packet on EventsTopic.
func (j *job) sendEvent(ev pipeline.Event) bool {
	data, err := json.Marshal(ev)
	if err == nil {
		err = j.room.LocalParticipant.PublishDataPacket(&lksdk.UserDataPacket{Payload: data, Topic: EventsTopic},
			lksdk.WithDataPublishReliable(true))
	}
	if err != nil {
		j.log.Debug().Err(err).Str("event", ev.Type).Msg("livekit event send failed")
		return false
	}
	return true
}

type nopObserver struct{}

func (nopObserver) TurnTraced(pipeline.Trace) {}
func (nopObserver) FrameDropped(string)       {}
