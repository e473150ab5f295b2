package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
)

// sessionPlan is what one virtual device does: the questions it asks, one
// per turn, until it has asked turns of them or the deadline passed.
type sessionPlan struct {
	id          int        // the session's index in its level: its first question
	questions   []question // asked in order, cycling
	turns       int        // questions to ask; 0 = until deadline
	deadline    time.Time  // with turns 0: no new question after it
	pause       time.Duration
	bargeIn     time.Duration // > 0: the next question starts this long after the answer's first audio
	turnTimeout time.Duration
	device      string // the start message's device id; "" = none
	// clock paces the microphone: a frame per tick at phase (frameClock;
	// nil: a ticker of the session's own).
	clock *frameClock
	phase time.Duration
}

// question returns the i-th question of the plan (0-based).
func (p sessionPlan) question(i int) question { return p.questions[(p.id+i)%len(p.questions)] }

// more says whether the plan asks an i-th question.
func (p sessionPlan) more(i int, now time.Time) bool {
	if p.turns > 0 {
		return i < p.turns
	}
	return now.Before(p.deadline)
}

// A device is one virtual speaker on one transport. session runs a whole
// session (connect, ask the plan's questions turn after turn, stop),
// calling report as each turn ends. An error means the session itself
// failed; a refusal at admission is a *refusedError.
type device interface {
	session(ctx context.Context, p sessionPlan, report func(turnResult)) error
}

// refusedError is a session the server did not admit (HTTP 503 busy, or
// its error event before ready).
type refusedError struct {
	status int
	code   string
	msg    string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("session refused: HTTP %d %s: %s", e.status, e.code, e.msg)
}

// bench runs levels against one server.
type bench struct {
	o          options
	qs         []question
	dev        device
	metricsURL string
	progress   io.Writer
	turnsOut   io.Writer // --turns-out: every turn as a JSON line; nil = off
}

// plan is the i-th session's of a level; deadline is the level's with
// --duration, clock the level's microphone clock.
func (b *bench) plan(i int, deadline time.Time, clock *frameClock) sessionPlan {
	first := i
	if b.o.sameQuestions {
		first = 0
	}
	p := sessionPlan{id: first, questions: b.qs, turns: b.o.turns, pause: b.o.pause,
		bargeIn: b.o.bargeIn, turnTimeout: b.o.turnTimeout,
		clock: clock, phase: phaseOf(time.Duration(i) * b.o.stagger)}
	if b.o.duration > 0 {
		p.turns, p.deadline = 0, deadline.Add(time.Duration(i)*b.o.stagger)
	}
	if b.o.devices {
		p.device = fmt.Sprintf("voxbench-%d", i)
	}
	return p
}

// level runs n sessions (arriving o.stagger apart) and summarises them.
func (b *bench) level(ctx context.Context, n int) levelStats {
	before := scrape(ctx, b.metricsURL)
	load0 := loadAvg()
	cpu0, wall0 := selfCPU(), time.Now()

	var (
		mu      sync.Mutex
		turns   []turnResult
		busy    int
		refused int
		failed  = map[string]int{}
	)
	var deadline time.Time
	if b.o.duration > 0 {
		deadline = time.Now().Add(b.o.duration)
	}
	clock := newFrameClock(time.Now())
	cctx, stopClock := context.WithCancel(ctx)
	var clockDone sync.WaitGroup
	clockDone.Go(func() { clock.run(cctx) })
	var wg sync.WaitGroup
	for i := range n {
		p := b.plan(i, deadline, clock)
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(i) * b.o.stagger):
			case <-ctx.Done():
				return
			}
			err := b.dev.session(ctx, p, func(t turnResult) {
				t.Session = i
				mu.Lock()
				turns = append(turns, t)
				mu.Unlock()
			})
			if err == nil || ctx.Err() != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			var re *refusedError
			switch {
			case errors.As(err, &re) && re.code == pipeline.CodeBusy:
				busy++
				refused++
			case errors.As(err, &re):
				refused++
				failed[re.code]++
			default:
				failed["session_failed"]++
			}
			fmt.Fprintf(b.progress, "\r\033[Ksession %d: %v\n", i, err)
		})
	}

	stopTicker := make(chan struct{})
	var tick sync.WaitGroup
	tick.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopTicker:
				return
			case <-t.C:
				mu.Lock()
				st := summarise(n, turns)
				mu.Unlock()
				fmt.Fprintf(b.progress, "\r\033[KN=%d  %5.0fs  turns %d  heard p50/p95 %.0f/%.0f ms  v2v p95 %.0f ms  errors %d  busy %d  load %.1f",
					n, time.Since(wall0).Seconds(), st.Turns, st.HeardP50, st.HeardP95, st.V2VP95, st.Errors, busy, loadAvg())
			}
		}
	})
	wg.Wait()
	stopClock()
	clockDone.Wait()
	close(stopTicker)
	tick.Wait()

	wall := time.Since(wall0)
	cpu := selfCPU() - cpu0
	after := scrape(ctx, b.metricsURL)
	st := summarise(n, turns)
	if b.turnsOut != nil {
		writeTurns(b.turnsOut, n, turns, b.progress)
	}
	st.Busy = busy
	st.Admitted = n - refused
	for code, k := range failed {
		st.Errors += k
		st.ErrorsByCode[code] += k
	}
	st.WallSeconds = round1(wall.Seconds())
	st.Load = [2]float64{load0, loadAvg()}
	st.BenchCPU = cpu.Seconds() / wall.Seconds() * 8 / float64(n)
	st.BenchCPU = float64(int(st.BenchCPU*10000)) / 10000
	if before.ok && after.ok {
		st.ServerCPU = float64(int((after.cpu-before.cpu)/wall.Seconds()*100)) / 100
		st.DroppedFrames = int(after.dropped - before.dropped)
		st.BufferedFrames = int(after.buffered - before.buffered)
	} else {
		st.DroppedFrames = -1 // unknown: reported, and never "within the SLO"
	}
	fmt.Fprintf(b.progress, "\r\033[KN=%d done in %.0fs: %d turns, heard p50/p95/p99 %.0f/%.0f/%.0f ms, v2v p95 %.0f ms, dropped %d, errors %d, busy %d, server CPU %.2f, load %.1f→%.1f\n",
		n, wall.Seconds(), st.Turns, st.HeardP50, st.HeardP95, st.HeardP99, st.V2VP95, st.DroppedFrames, st.Errors, st.Busy, st.ServerCPU, st.Load[0], st.Load[1])
	return st
}
