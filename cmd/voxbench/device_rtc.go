package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// rtcDevice talks WebRTC like the browser page: POST /rtc/offer, Opus at
// 48 kHz both ways on audio tracks, events and control on the "events"
// data channel.
type rtcDevice struct {
	offerURL string
}

const (
	rtcRate        = 48000
	rtcEventsLabel = "events"
)

func newRTCDevice(raw string) (device, error) {
	u, err := httpURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: --url: %w", errCommandLine, err)
	}
	u.Path = "/rtc/offer"
	return &rtcDevice{offerURL: u.String()}, nil
}

// rtcLink sends the microphone as Opus samples on the track and control
// messages on the data channel.
type rtcLink struct {
	mic    *webrtc.TrackLocalStaticSample
	dc     *webrtc.DataChannel
	enc    *audio.OpusEncoder
	packet []byte
}

func (l *rtcLink) sendAudio(pcm []int16) error {
	n, err := l.enc.Encode(pcm, l.packet)
	if err != nil {
		return err
	}
	return l.mic.WriteSample(media.Sample{Data: l.packet[:n], Duration: 20 * time.Millisecond})
}

func (l *rtcLink) sendJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return l.dc.SendText(string(b))
}

func (d *rtcDevice) session(ctx context.Context, p sessionPlan, report func(turnResult)) error {
	var me webrtc.MediaEngine
	if err := me.RegisterDefaultCodecs(); err != nil {
		return err
	}
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	api := webrtc.NewAPI(webrtc.WithMediaEngine(&me), webrtc.WithSettingEngine(se))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return err
	}
	// in is never closed: pion's goroutines put on it until done closes.
	in := newInbox()
	done := make(chan struct{})
	var closeOnce sync.Once
	stop := func() {
		closeOnce.Do(func() { close(done) })
		_ = pc.Close()
	}
	defer stop()
	deliver := func(m wsMsg) { in.put(m, done) }

	mic, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rtcRate, Channels: 2}, "mic", "voxbench")
	if err != nil {
		return err
	}
	if _, err := pc.AddTrack(mic); err != nil {
		return err
	}
	dc, err := pc.CreateDataChannel(rtcEventsLabel, nil)
	if err != nil {
		return err
	}
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		var ev pipeline.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			deliver(wsMsg{ev: &ev, at: time.Now()})
		}
	})
	pc.OnTrack(func(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		dec, err := audio.NewOpusDecoder(rtcRate)
		if err != nil {
			return
		}
		pcm := make([]int16, 5760)
		for {
			pkt, _, err := track.ReadRTP()
			if err != nil {
				return
			}
			n, err := dec.Decode(pkt.Payload, pcm)
			if err != nil {
				continue
			}
			deliver(wsMsg{audio: append([]int16(nil), pcm[:n]...), at: time.Now()})
		}
	})

	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return ctx.Err()
	}
	answer, err := d.postOffer(ctx, *pc.LocalDescription(), p.device)
	if err != nil {
		return err
	}
	if err := pc.SetRemoteDescription(answer); err != nil {
		return fmt.Errorf("rtc answer: %w", err)
	}
	// The server sends ready on the data channel once it opens.
	wait := time.NewTimer(20 * time.Second)
	defer wait.Stop()
	for ready := false; !ready; {
		select {
		case m := <-in.msgs:
			switch {
			case m.ev == nil:
			case m.ev.Type == pipeline.EventReady:
				ready = true
			case m.ev.Type == pipeline.EventError:
				return &refusedError{status: http.StatusOK, code: m.ev.Code, msg: m.ev.Message}
			}
		case <-wait.C:
			return errors.New("rtc: no ready event within 20 s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	enc, err := audio.NewOpusEncoder(rtcRate, 32000)
	if err != nil {
		return err
	}
	l := &rtcLink{mic: mic, dc: dc, enc: enc, packet: make([]byte, audio.MaxOpusPacket)}
	err = converse(ctx, l, rtcRate, rtcRate, p, in, report)
	_ = l.sendJSON(map[string]string{"type": "stop"})
	return err
}

// postOffer sends the offer; a refusal (503 busy) becomes a refusedError.
func (d *rtcDevice) postOffer(ctx context.Context, offer webrtc.SessionDescription, device string) (webrtc.SessionDescription, error) {
	var answer webrtc.SessionDescription
	body, err := json.Marshal(struct {
		webrtc.SessionDescription
		Device string `json:"device,omitempty"`
	}{offer, device})
	if err != nil {
		return answer, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.offerURL, bytes.NewReader(body))
	if err != nil {
		return answer, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer, fmt.Errorf("rtc offer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer, dialRefusal(resp, nil)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return answer, fmt.Errorf("rtc answer body: %w", err)
	}
	return answer, nil
}
