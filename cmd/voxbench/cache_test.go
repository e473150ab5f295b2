package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline"
)

// TestSummariseCache: turns split by the trace's cache outcome, with the
// hit rate over the turns that reported one and heard latency apart.
func TestSummariseCache(t *testing.T) {
	ms := func(v float64) *float64 { return &v }
	turns := []turnResult{
		{Cache: pipeline.CacheMiss, HeardMs: ms(900)},
		{Cache: pipeline.CacheMiss, HeardMs: ms(1100)},
		{Cache: pipeline.CacheHit, HeardMs: ms(300)},
		{Cache: pipeline.CacheHit, HeardMs: ms(320)},
		{Cache: pipeline.CacheOff, HeardMs: ms(1000)},
		{HeardMs: ms(1000)}, // no outcome reported: not counted
	}
	st := summarise(1, turns)
	c := st.Cache
	if c == nil {
		t.Fatal("no cache figures")
	}
	if c.Hits != 2 || c.Misses != 2 || c.Off != 1 || c.HitRatePct != 40 {
		t.Errorf("cache %+v, want 2 hits, 2 misses, 1 off, 40%%", c)
	}
	if c.HitHeard.P50 != 300 || c.MissHeard.P50 != 900 || c.MissHeard.P95 != 1100 {
		t.Errorf("heard hit %+v miss %+v", c.HitHeard, c.MissHeard)
	}
	var b bytes.Buffer
	writeTable(&b, report{Results: []levelStats{st}})
	if !strings.Contains(b.String(), "answer cache at N=1: 2 hits, 2 misses, 1 off (hit rate 40.0%)") {
		t.Errorf("table lacks the cache line:\n%s", b.String())
	}
	if summarise(1, turns[5:]).Cache != nil {
		t.Error("cache figures for turns that reported none")
	}
}
