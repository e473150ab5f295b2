package web

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

// TestAnswerCacheMetrics: each traced turn counts once by its cache
// outcome (bypasses by reason), and looked-up turns' heard latency goes to
// the histogram of their outcome.
func TestAnswerCacheMetrics(t *testing.T) {
	m := NewMetrics()
	end := time.Unix(100, 0)
	trace := func(cache, bypass string, heard time.Duration) pipeline.Trace {
		return pipeline.Trace{Cache: cache, CacheBypass: bypass, Marks: map[string]time.Time{
			pipeline.MarkSpeechEnd: end, pipeline.MarkFirstAudibleOut: end.Add(heard),
		}}
	}
	m.TurnTraced(trace(pipeline.CacheHit, "", 210*time.Millisecond))
	m.TurnTraced(trace(pipeline.CacheHit, "", 220*time.Millisecond))
	m.TurnTraced(trace(pipeline.CacheMiss, "", 900*time.Millisecond))
	m.TurnTraced(trace(pipeline.CacheOff, answercache.ReasonTime, time.Second))
	m.TurnTraced(trace(pipeline.CacheOff, "", time.Second)) // cache off: not counted
	for _, c := range []struct {
		outcome, reason string
		want            float64
	}{
		{pipeline.CacheHit, "", 2}, {pipeline.CacheMiss, "", 1}, {"bypass", answercache.ReasonTime, 1}, {"bypass", answercache.ReasonContext, 0},
	} {
		var got dto.Metric
		if err := m.answerCache.WithLabelValues(c.outcome, c.reason).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetCounter().GetValue() != c.want {
			t.Errorf("voxpipe_answer_cache_total{outcome=%q,reason=%q} = %v, want %v", c.outcome, c.reason, got.GetCounter().GetValue(), c.want)
		}
	}
	for outcome, want := range map[string]uint64{pipeline.CacheHit: 2, pipeline.CacheMiss: 1} {
		var h dto.Metric
		obs, err := m.cacheHeard.GetMetricWithLabelValues(outcome)
		if err != nil {
			t.Fatal(err)
		}
		if err := obs.(interface{ Write(*dto.Metric) error }).Write(&h); err != nil {
			t.Fatal(err)
		}
		if got := h.GetHistogram().GetSampleCount(); got != want {
			t.Errorf("voxpipe_answer_cache_heard_seconds{outcome=%q} has %d samples, want %d", outcome, got, want)
		}
	}
}
