package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// RTCConfig configures the WebRTC transport (POST /rtc/offer).
type RTCConfig struct {
	// ICEServers are STUN/TURN servers offered to ICE. Empty: host
	// candidates only (a LAN, or a server with a public address).
	ICEServers []ICEServer
	// UDPPortMin..UDPPortMax bounds the UDP ports ICE listens on, for
	// firewalls; both 0 = any ephemeral port.
	UDPPortMin, UDPPortMax uint16
	// IncludeLoopback offers 127.0.0.1 candidates too (tests, a client on
	// the same machine).
	IncludeLoopback bool
	// ConnectTimeout is how long a peer may take from the answer to an open
	// "events" data channel before the session is given up. 0 = 20 s.
	ConnectTimeout time.Duration
	// FailedTimeout ends a session whose peer has sent nothing (no media,
	// no ICE keepalive) for this long. 0 = 15 s.
	FailedTimeout time.Duration
}

// ICEServer is one STUN or TURN server.
type ICEServer struct {
	URLs       []string `yaml:"urls" json:"urls"`
	Username   string   `yaml:"username" json:"username,omitempty"`
	Credential string   `yaml:"credential" json:"credential,omitempty"`
}

const (
	// rtcRate is the Opus clock and the session's audio rate both ways.
	rtcRate = 48000
	// rtcEventsLabel names the data channel the client creates for events.
	rtcEventsLabel        = "events"
	defaultConnectTimeout = 20 * time.Second
	defaultFailedTimeout  = 15 * time.Second
	// maxOfferBytes bounds the POST body; real offers are a few kB.
	maxOfferBytes = 64 << 10
	// rtpBufBytes holds one RTP packet (an Ethernet MTU is enough).
	rtpBufBytes = 1500
)

// newRTCAPI builds the pion API: Opus only, host candidates unless ICE
// servers are configured, an optional port range.
func newRTCAPI(cfg RTCConfig) (*webrtc.API, error) {
	var media webrtc.MediaEngine
	if err := media.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rtcRate, Channels: 2,
			SDPFmtpLine: "minptime=10;useinbandfec=1"},
		PayloadType: 111,
	}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, fmt.Errorf("%w: rtc: opus codec: %w", ErrConfig, err)
	}
	var se webrtc.SettingEngine
	if cfg.UDPPortMin != 0 || cfg.UDPPortMax != 0 {
		if err := se.SetEphemeralUDPPortRange(cfg.UDPPortMin, cfg.UDPPortMax); err != nil {
			return nil, fmt.Errorf("%w: rtc: udp port range %d-%d: %w", ErrConfig, cfg.UDPPortMin, cfg.UDPPortMax, err)
		}
	}
	se.SetIncludeLoopbackCandidate(cfg.IncludeLoopback)
	// Browsers hide host addresses behind mDNS names; resolve them, but
	// publish our own addresses plainly.
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeQueryOnly)
	// Give up on a vanished peer sooner than pion's default 25 s.
	failed := cfg.FailedTimeout
	if failed <= 0 {
		failed = defaultFailedTimeout
	}
	se.SetICETimeouts(min(5*time.Second, failed/2), failed, 2*time.Second)
	return webrtc.NewAPI(webrtc.WithMediaEngine(&media), webrtc.WithSettingEngine(se)), nil
}

func (cfg RTCConfig) iceServers() []webrtc.ICEServer {
	out := make([]webrtc.ICEServer, 0, len(cfg.ICEServers))
	for _, s := range cfg.ICEServers {
		out = append(out, webrtc.ICEServer{URLs: s.URLs, Username: s.Username, Credential: s.Credential})
	}
	return out
}

// rtcSession is one WebRTC voice session: Opus in from the client's audio
// track, Opus out on ours, events both ways on the "events" data channel.
//
// Goroutines: pion runs the OnTrack handler (the audio reader, the only
// sender of audio on in) and the data channel callbacks (control input);
// serve runs the writer (the only reader of out) and starts the session
// goroutine, which closes out. in is never closed: its senders are pion
// callbacks, so the session ends through ctx, which is cancelled when the
// peer connection fails or closes, the data channel closes, the session
// ends, or the server shuts down. serve returns only after pc.Close and
// the audio reader has exited.
type rtcSession struct {
	srv *Server
	pc  *webrtc.PeerConnection
	id  string
	log zerolog.Logger
	// sessLog is log without the id, for pipeline.NewSession (which adds it).
	sessLog zerolog.Logger
	device  string // the offer's device id (pipeline.Config.Device)

	ctx    context.Context
	cancel context.CancelFunc

	in     chan pipeline.Input
	out    chan pipeline.Output
	runErr chan error // session goroutine → serve, buffered 1

	track   *webrtc.TrackLocalStaticSample
	started atomic.Bool // the session runs: audio is forwarded

	rules voice.NegotiatedRules // pion may run data channel callbacks concurrently

	dcOpen     chan struct{} // closed when the events channel opens
	dcOpenOnce sync.Once

	mu      sync.Mutex // guards events, closed and readers.Add
	events  *webrtc.DataChannel
	closed  bool
	readers sync.WaitGroup // OnTrack audio readers
}

// serveRTCConfig tells the page which ICE servers to use: behind NAT the
// browser needs the same STUN/TURN servers as the server (TURN credentials
// are meant for clients).
func (s *Server) serveRTCConfig(w http.ResponseWriter, _ *http.Request) {
	servers := s.cfg.RTC.ICEServers
	if servers == nil {
		servers = []ICEServer{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		ICEServers []ICEServer `json:"ice_servers"`
	}{servers})
}

func (s *Server) serveRTCOffer(w http.ResponseWriter, r *http.Request) {
	var offer struct {
		webrtc.SessionDescription
		Device string `json:"device"` // optional, as /ws start's (docs/protocol.md)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxOfferBytes+1))
	if err == nil && len(body) > maxOfferBytes {
		err = fmt.Errorf("offer over %d bytes", maxOfferBytes)
	}
	if err == nil {
		err = json.Unmarshal(body, &offer)
	}
	if err == nil && (offer.Type != webrtc.SDPTypeOffer || offer.SDP == "") {
		err = errors.New(`want {"type":"offer","sdp":"..."}`)
	}
	if err == nil {
		err = pipeline.CheckDevice(offer.Device)
	}
	if err != nil {
		s.metrics.sessionRejected(reasonUpgrade)
		writeJSONError(w, http.StatusBadRequest, pipeline.CodeBadMessage, "rtc offer: "+err.Error())
		return
	}
	if reason := s.reserve(); reason != "" {
		s.rejectBusy(w, reason)
		return
	}
	rs, answer, err := s.newRTCSession(r, offer.SessionDescription, offer.Device)
	if err != nil {
		s.release()
		s.metrics.sessionRejected(reasonUpgrade)
		s.log.Info().Err(err).Str("remote", r.RemoteAddr).Msg("rtc offer refused")
		writeJSONError(w, http.StatusBadRequest, pipeline.CodeBadMessage, err.Error())
		return
	}
	go func() {
		defer s.release()
		rs.serve()
	}()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// newRTCSession negotiates: it returns the session (not yet serving) and
// the answer with every ICE candidate gathered.
func (s *Server) newRTCSession(r *http.Request, offer webrtc.SessionDescription, device string) (*rtcSession, *webrtc.SessionDescription, error) {
	pc, err := s.rtcAPI.NewPeerConnection(webrtc.Configuration{ICEServers: s.cfg.RTC.iceServers()})
	if err != nil {
		return nil, nil, fmt.Errorf("rtc: peer connection: %w", err)
	}
	id := newSessionID()
	log := s.log.With().Str("remote", r.RemoteAddr).Str("transport", transportWebRTC).Logger()
	rs := &rtcSession{
		srv:     s,
		pc:      pc,
		id:      id,
		log:     log.With().Str("session", id).Logger(),
		sessLog: log,
		device:  device,
		in:      make(chan pipeline.Input, inputQueue),
		out:     make(chan pipeline.Output),
		runErr:  make(chan error, 1),
		dcOpen:  make(chan struct{}),
	}
	rs.ctx, rs.cancel = s.sessionContext()
	fail := func(err error) (*rtcSession, *webrtc.SessionDescription, error) {
		rs.cancel()
		rs.closePeer()
		return nil, nil, err
	}
	rs.track, err = webrtc.NewTrackLocalStaticSample(
		webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rtcRate, Channels: 2}, "answer", "voxpipe")
	if err != nil {
		return fail(fmt.Errorf("rtc: audio track: %w", err))
	}
	if _, err := pc.AddTrack(rs.track); err != nil {
		return fail(fmt.Errorf("rtc: add audio track: %w", err))
	}
	pc.OnTrack(rs.onTrack)
	pc.OnDataChannel(rs.onDataChannel)
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		rs.log.Debug().Str("state", st.String()).Msg("rtc connection state")
		if st == webrtc.PeerConnectionStateFailed || st == webrtc.PeerConnectionStateClosed {
			rs.cancel()
		}
	})

	if err := pc.SetRemoteDescription(offer); err != nil {
		return fail(fmt.Errorf("rtc: bad offer: %w", err))
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return fail(fmt.Errorf("rtc: answer: %w", err))
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return fail(fmt.Errorf("rtc: local description: %w", err))
	}
	select {
	case <-gathered:
	case <-r.Context().Done():
		return fail(fmt.Errorf("rtc: client gone while gathering candidates: %w", r.Context().Err()))
	case <-rs.ctx.Done():
		return fail(errors.New("rtc: server shutting down"))
	}
	if !s.trackRTC(rs, true) {
		return fail(errors.New("rtc: server shutting down"))
	}
	return rs, pc.LocalDescription(), nil
}

// serve runs the session to its end, then tears the peer connection down.
func (rs *rtcSession) serve() {
	defer rs.srv.trackRTC(rs, false)
	defer rs.closePeer()
	defer rs.cancel()

	timeout := rs.srv.cfg.RTC.ConnectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-rs.dcOpen:
	case <-timer.C:
		rs.log.Info().Dur("timeout", timeout).Msg("rtc peer never opened the events channel")
		return
	case <-rs.ctx.Done():
		return
	}

	cfg := rs.srv.cfg.Pipeline
	cfg.InputRate, cfg.OutputRate = rtcRate, rtcRate
	cfg.Device = rs.device
	sess, p := voice.Start(rs.id, cfg, rs.srv.backends, rs.srv.metrics.ForSession(rs.id, rs.srv.observer(transportWebRTC, rs.id, "")), rs.sessLog)
	if p != nil {
		rs.log.Error().Str("code", p.Code).Str("reason", p.Message).Msg("rtc session")
		rs.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: p.Message})
		return
	}
	w, err := newRTCWriter(rs)
	if err != nil {
		rs.log.Error().Err(err).Msg("rtc writer")
		rs.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: err.Error()})
		return
	}
	rs.log.Info().Msg("rtc session started")
	// Running before ready: a client may send stop the moment ready
	// arrives, and pion hands it to onMessage on another goroutine; sent
	// before Running it was refused with not_started and the session went
	// on (TestRTCStop, once under -race). rs.in holds it until Run reads.
	rs.rules.Running()
	rs.sendEvent(pipeline.Event{Type: pipeline.EventReady, Encoding: EncodingOpus, SampleRate: rtcRate, FrameMs: FrameMs})
	rs.started.Store(true)
	go func() {
		defer close(rs.out)
		rs.runErr <- rs.srv.runSession(rs.ctx, recording{id: rs.id, inRate: rtcRate, outRate: rtcRate}, sess, rs.in, rs.out, rs.log)
	}()
	w.loop()
	if err := <-rs.runErr; err != nil && !errors.Is(err, context.Canceled) {
		rs.log.Warn().Err(err).Msg("rtc session failed")
		rs.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: err.Error()})
	}
	rs.log.Info().Msg("rtc session ended")
}

// closePeer closes the peer connection and waits for the audio reader.
// Idempotent.
func (rs *rtcSession) closePeer() {
	rs.mu.Lock()
	rs.closed = true
	rs.mu.Unlock()
	if err := rs.pc.Close(); err != nil {
		rs.log.Debug().Err(err).Msg("rtc close")
	}
	rs.readers.Wait()
}

// reasonBadRTP counts RTP packets the track could not read (a frame
// rejected without an error event: nobody reads one per packet).
const reasonBadRTP = "bad_rtp"

// maxBadRTP bad packets in a row end the session: a track that only
// fails is not a microphone (and a permanent error must not spin).
const maxBadRTP = 5000

// rtpReadEnded says whether a track read error means the track is gone
// (the peer connection or its transport closed) rather than one bad packet.
func rtpReadEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed)
}

// onTrack reads the client's microphone (pion runs it in a goroutine of
// its own per track).
func (rs *rtcSession) onTrack(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
	if track.Kind() != webrtc.RTPCodecTypeAudio {
		return
	}
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return
	}
	rs.readers.Add(1)
	rs.mu.Unlock()
	defer rs.readers.Done()

	up, err := voice.NewUplink(rs.in, EncodingOpus, rtcRate)
	if err != nil {
		rs.log.Error().Err(err).Msg("rtc opus decoder")
		rs.cancel()
		return
	}
	buf := make([]byte, rtpBufBytes)
	var pkt rtp.Packet
	var bad, inARow int
	for {
		n, _, err := track.Read(buf)
		if err != nil {
			if rtpReadEnded(err) || rs.ctx.Err() != nil {
				return // the peer connection or the track closed
			}
			// One bad packet (pion reports e.g. an unnegotiated payload
			// type per packet): count it and read on.
			if bad++; bad == 1 || bad%1000 == 0 {
				rs.log.Warn().Err(err).Int("bad_packets", bad).Msg("rtc: skipping a bad RTP packet")
			}
			rs.srv.metrics.frameRejected(reasonBadRTP)
			if inARow++; inARow >= maxBadRTP {
				rs.log.Error().Err(err).Int("bad_packets", bad).Msg("rtc: only bad RTP packets; closing the session")
				rs.cancel()
				return
			}
			continue
		}
		inARow = 0
		if !rs.started.Load() {
			continue // nothing listens yet
		}
		queued, p := rtpAudio(&pkt, buf[:n], up)
		switch {
		case p != nil:
			rs.srv.metrics.frameRejected(p.Code)
		case !queued:
			rs.srv.metrics.FrameDropped(reasonInputFull)
		}
	}
}

// rtpAudio queues the Opus payload of one RTP packet (data, read into pkt)
// on up. A packet that does not parse or carries no payload is skipped
// (queued true: there is nothing to count); an undecodable payload is a
// bad_audio problem; queued false means the session's input was full.
func rtpAudio(pkt *rtp.Packet, data []byte, up *voice.Uplink) (queued bool, p *voice.Problem) {
	if err := pkt.Unmarshal(data); err != nil || len(pkt.Payload) == 0 {
		return true, nil
	}
	return up.Write(pkt.Payload)
}

func (rs *rtcSession) onDataChannel(dc *webrtc.DataChannel) {
	if dc.Label() != rtcEventsLabel {
		rs.log.Debug().Str("label", dc.Label()).Msg("rtc: ignoring data channel")
		return
	}
	rs.mu.Lock()
	rs.events = dc
	rs.mu.Unlock()
	dc.OnOpen(func() { rs.dcOpenOnce.Do(func() { close(rs.dcOpen) }) })
	dc.OnClose(rs.cancel)
	dc.OnMessage(rs.onMessage)
}

// onMessage handles a client control message from the data channel. The
// offer negotiated the format (voice.NegotiatedRules).
func (rs *rtcSession) onMessage(m webrtc.DataChannelMessage) {
	ev, p := rs.rules.Parse(m.Data)
	switch {
	case p != nil:
		rs.reject(p.Code, p.Message)
	case ev != nil:
		voice.Forward(rs.ctx, rs.in, ev)
	}
}

func (rs *rtcSession) reject(code, msg string) {
	rs.srv.metrics.frameRejected(code)
	rs.log.Debug().Str("code", code).Str("reason", msg).Msg("client message rejected")
	rs.sendEvent(pipeline.Event{Type: pipeline.EventError, Code: code, Message: msg})
}

// sendEvent writes one event on the data channel (pion serialises sends).
func (rs *rtcSession) sendEvent(ev pipeline.Event) bool {
	if ev.Type == pipeline.EventError {
		rs.srv.metrics.ErrorSent(ev.Code)
	}
	rs.mu.Lock()
	dc := rs.events
	rs.mu.Unlock()
	if dc == nil {
		return false
	}
	data, err := json.Marshal(ev)
	if err == nil {
		err = dc.SendText(string(data))
	}
	if err != nil {
		rs.log.Debug().Err(err).Str("event", ev.Type).Msg("rtc event send failed")
		return false
	}
	return true
}

// rtcWriter is the session's voice.Sink: events to the data channel at
// once, answer audio to the Opus track through a voice.Paced stream (why
// RTP wants the pacer's lead held back: see voice.Paced).
type rtcWriter struct {
	rs     *rtcSession
	stream *voice.Paced
}

func newRTCWriter(rs *rtcSession) (*rtcWriter, error) {
	w := &rtcWriter{rs: rs}
	stream, err := voice.NewPaced(rtcRate, rs.srv.cfg.OpusBitrate, w)
	if err != nil {
		return nil, err
	}
	w.stream = stream
	return w, nil
}

// loop runs until the session closes out (voice.Paced.Serve).
func (w *rtcWriter) loop() { w.stream.Serve(w.rs.out, w) }

// Event sends one event (voice.Sink).
func (w *rtcWriter) Event(ev pipeline.Event) bool {
	if ev.Type == pipeline.EventAudio {
		fillAudioFormat(&ev, EncodingOpus, rtcRate)
	}
	return w.rs.sendEvent(ev)
}

// Stop ends the session after a failed write (voice.Sink).
func (w *rtcWriter) Stop() { w.rs.cancel() }

// Tick has nothing to do (voice.Sink).
func (w *rtcWriter) Tick(time.Time) {}

// WritePacket writes one 20 ms packet to the track (voice.Track).
func (w *rtcWriter) WritePacket(packet []byte) error {
	err := w.rs.track.WriteSample(media.Sample{Data: packet, Duration: FrameMs * time.Millisecond})
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		w.rs.log.Debug().Err(err).Msg("rtc audio write failed")
	}
	return err
}

// EncodeFailed counts a dropped answer frame (voice.Track).
func (w *rtcWriter) EncodeFailed(err error, samples int) {
	w.rs.srv.metrics.FrameDropped(reasonOpusEncode)
	w.rs.log.Debug().Err(err).Int("samples", samples).Msg("opus encode")
}
