package web

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	dto "github.com/prometheus/client_model/go"

	"github.com/voxpipe/voxpipe/pipeline"
)

// rtcClientInterceptors, when set, are the test client's interceptors.
var rtcClientInterceptors *interceptor.Registry

// ptMangler rewrites the payload type of the next n outgoing RTP packets
// to one the offer did not negotiate.
type ptMangler struct {
	interceptor.NoOp
	n atomic.Int32
}

func (m *ptMangler) NewInterceptor(string) (interceptor.Interceptor, error) { return m, nil }

func (m *ptMangler) BindLocalStream(_ *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if m.n.Add(-1) >= 0 {
			bad := *h
			bad.PayloadType = 99
			return w.Write(&bad, payload, a)
		}
		return w.Write(h, payload, a)
	})
}

// One bad RTP packet used to end the track's reader: the session stayed up,
// deaf, with no log or event (issue 14 item 6). Bad packets are now counted
// and skipped.
func TestRTCBadPacketsSkipped(t *testing.T) {
	checkLeaks(t)
	m := &ptMangler{}
	var reg interceptor.Registry
	reg.Add(m)
	rtcClientInterceptors = &reg
	defer func() { rtcClientInterceptors = nil }()
	const question = "what is the weather like today"
	ts := rtcTestServer(t, []string{"It is sunny."}, nil)
	c := newRTCClient(t, ts.http.URL)
	c.until("ready", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventReady })
	heard := func(turn int) string {
		c.speech <- utterance(t, question, 48000)
		var transcript strings.Builder
		for _, ev := range c.until("trace of the turn", traceOf(turn)) {
			if ev.Type == pipeline.EventTranscript && ev.Final {
				transcript.WriteString(ev.Text)
			}
		}
		return transcript.String()
	}
	if got := heard(1); !strings.Contains(got, "weather") {
		t.Fatalf("turn 1: transcript %q, want the question", got)
	}
	m.n.Store(5) // the next five packets carry payload type 99
	if got := heard(2); !strings.Contains(got, "weather") {
		t.Errorf("turn 2, after five bad packets: transcript %q, want the question", got)
	}
	if n := ts.srv.metrics.framesRejectedCount(reasonBadRTP); n < 1 {
		t.Errorf("bad packets counted %v, want at least 1", n)
	}
}

func (m *Metrics) framesRejectedCount(reason string) float64 {
	var d dto.Metric
	_ = m.framesRejected.WithLabelValues(reason).Write(&d)
	return d.GetCounter().GetValue()
}
