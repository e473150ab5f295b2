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
		{Cache: pipeline.CacheHit, HeardMs: ms(300), EndSilenceMs: 260},
		{Cache: pipeline.CacheHit, HeardMs: ms(320), EndSilenceMs: 300},
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
	if c.HitAfterEOT.P50 != 20 || c.HitAfterEOT.P95 != 40 || c.MissAfterEOT.P50 != 0 {
		t.Errorf("after the end-of-turn wait: hits %+v misses %+v, want 20/40 and none", c.HitAfterEOT, c.MissAfterEOT)
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
