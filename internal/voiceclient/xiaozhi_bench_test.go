package voiceclient

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/pipeline"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
	"github.com/voxpipe/voxpipe/web"
	"github.com/voxpipe/voxpipe/web/xiaozhi"

	"net/http/httptest"
)

// BenchmarkHeardXiaozhiVsWS measures, on one server and the same recording,
// the heard latency of a xiaozhi device session against /ws sessions (PCM16
// and Opus), one session of each in turn for VOXPIPE_XIAOZHI_ROUNDS rounds
// (default 6; the order rotates every round), with the tts start lead on
// (100 ms) and off. It reports the
// medians of heard_ms and of heard_after_final_ms (from the final
// transcript's arrival: free of the recogniser's time, which swings by
// seconds on a loaded machine), and the medians of the per-round
// differences device − /ws PCM16 and device − /ws Opus (the same codec up:
// on goforward.raw the server's VAD ends PCM16 speech later than
// Opus-coded speech, which the after-the-final figures do not show, so
// Opus is the like-for-like /ws session). The LLM is canned.
//
//	go test -run XXX -bench BenchmarkHeardXiaozhiVsWS -benchtime 1x ./internal/voiceclient/
func BenchmarkHeardXiaozhiVsWS(b *testing.B) {
	rounds := 6
	if n, err := strconv.Atoi(os.Getenv("VOXPIPE_XIAOZHI_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	rec, err := asrsphinx.New(asrsphinx.DefaultConfig())
	if err != nil {
		b.Skipf("pocketsphinx unavailable: %v", err)
	}
	defer rec.Close()
	synth, err := ttsflite.New(ttsflite.DefaultConfig())
	if err != nil {
		b.Skipf("flite unavailable: %v", err)
	}
	raw, err := os.ReadFile("/usr/share/pocketsphinx/test/data/goforward.raw")
	if err != nil {
		b.Skipf("recording missing (requires pocketsphinx-testdata): %v", err)
	}
	speech := make([]int16, 16000*3/10, 16000*3/10+len(raw)/2)
	for i := 0; i+1 < len(raw); i += 2 {
		speech = append(speech, int16(uint16(raw[i])|uint16(raw[i+1])<<8))
	}
	for _, lead := range []time.Duration{100 * time.Millisecond, 0} {
		b.Run(fmt.Sprintf("lead=%v", lead), func(b *testing.B) {
			xc := xiaozhi.DefaultConfig()
			xc.TTSStartLead = lead
			srv, err := web.New(web.Config{MaxSessions: 4, MaxFrameBytes: 65536, IdleTimeout: 30 * time.Second,
				Pipeline: pipeline.DefaultConfig(), Xiaozhi: &xc},
				pipeline.Backends{ASR: rec, LLM: xzModel{answer: xzReply}, TTS: synth}, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer func() { _ = srv.Shutdown(context.Background()); hs.Close() }()
			wsURL := "ws" + hs.URL[len("http"):] + "/ws"
			heard := map[string][]float64{}
			after := map[string][]float64{}
			var diffs, diffsAfter, diffsOpus []float64
			for range b.N {
				for r := range rounds {
					got := map[string]float64{}
					// Each kind takes each place in the order equally (rotated
					// per round), after a pause: a session right after
					// another pays for the recogniser's background work.
					kinds := []string{"ws-pcm16", "ws-opus", "xiaozhi"}
					for i := range kinds {
						kind := kinds[(i+r)%len(kinds)]
						time.Sleep(time.Second)
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
						var res *Result
						switch kind {
						case "ws-pcm16":
							res, err = Run(ctx, Config{URL: wsURL, Turns: 1}, speech)
						case "ws-opus":
							res, err = Run(ctx, Config{URL: wsURL, Encoding: "opus", Rate: 16000, Turns: 1}, speech)
						default:
							res, err = RunXiaozhi(ctx, XiaozhiConfig{OTAURL: hs.URL + "/xiaozhi/ota/", Turns: 1}, speech)
						}
						cancel()
						if err != nil || len(res.Turns) == 0 || res.Turns[0].HeardMs == nil || res.Turns[0].HeardAfterFinalMs == nil {
							b.Fatalf("round %d %s: %v", r, kind, err)
						}
						got[kind], got[kind+"/after"] = *res.Turns[0].HeardMs, *res.Turns[0].HeardAfterFinalMs
						heard[kind] = append(heard[kind], got[kind])
						after[kind] = append(after[kind], got[kind+"/after"])
					}
					diffs = append(diffs, got["xiaozhi"]-got["ws-pcm16"])
					diffsOpus = append(diffsOpus, got["xiaozhi"]-got["ws-opus"])
					diffsAfter = append(diffsAfter, got["xiaozhi/after"]-got["ws-pcm16/after"])
					b.Logf("round %d: heard (after the final) ws-pcm16 %.0f (%.0f), ws-opus %.0f (%.0f), xiaozhi %.0f (%.0f) ms", r,
						got["ws-pcm16"], got["ws-pcm16/after"], got["ws-opus"], got["ws-opus/after"], got["xiaozhi"], got["xiaozhi/after"])
				}
			}
			for kind, v := range heard {
				b.ReportMetric(median(v), "heard_ms_"+kind)
				b.ReportMetric(median(after[kind]), "after_final_ms_"+kind)
			}
			b.ReportMetric(median(diffs), "xiaozhi-ws_heard_ms")
			b.ReportMetric(median(diffsOpus), "xiaozhi-ws_opus_heard_ms")
			b.ReportMetric(median(diffsAfter), "xiaozhi-ws_after_final_ms")
		})
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
