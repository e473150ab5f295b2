package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/cgo/malloc"
	"github.com/voxpipe/voxpipe/internal/config"
)

// tuneMalloc applies server.malloc and trims the C heap every
// trim_interval until the returned stop is called.
func tuneMalloc(ctx context.Context, c config.Malloc, log zerolog.Logger) (stop func()) {
	if !malloc.Tune(malloc.Config{Arenas: c.Arenas, MmapThreshold: c.MmapThreshold}) {
		log.Debug().Msg("malloc: settings not applied (not glibc, or built without cgo)")
	}
	if c.TrimInterval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.TrimInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				malloc.Trim()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// watchMalloc exports the C heap's totals (mallinfo2 at each scrape).
func watchMalloc(reg prometheus.Registerer) {
	g := func(name, help string, v func(malloc.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v(malloc.Read())) })
	}
	reg.MustRegister(
		g("voxpipe_c_heap_inuse_bytes", "C heap (glibc malloc) allocated and not freed: the engines' memory.", func(s malloc.Stats) int64 { return s.InUse }),
		g("voxpipe_c_heap_free_bytes", "C heap free inside the malloc arenas (trimmed pages still count).", func(s malloc.Stats) int64 { return s.Free }),
		g("voxpipe_c_heap_mmapped_bytes", "C heap in mmapped blocks.", func(s malloc.Stats) int64 { return s.Mmapped }),
	)
}
