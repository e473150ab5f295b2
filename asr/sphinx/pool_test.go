package sphinx

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/voxpipe/voxpipe/asr"
	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
)

// TestPoolFillsInBackground: New returns after one decoder; the rest of
// PoolSize is built in the background, and a warm pool serves sequential
// utterances without building or freeing any decoder.
func TestPoolFillsInBackground(t *testing.T) {
	requireModel(t)
	requireTestData(t)
	pcm := loadSet(t, "goforward")[0].pcm
	cfg := DefaultConfig()
	cfg.PoolSize, cfg.PoolMaxIdle = 2, 4
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Idle != 2 || st.Built != 2 {
		t.Fatalf("after the fill: %+v, want 2 idle, 2 built", st)
	}
	for i := range 3 {
		res, err := decode(context.Background(), r, pcm)
		if err != nil {
			t.Fatal(err)
		}
		if res.final != "go forward ten meters" {
			t.Errorf("utterance %d: have %q", i, res.final)
		}
	}
	if err := r.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The first Start took one of two idle decoders and started a build to
	// keep two ready; after that the returned decoder is kept (up to
	// PoolMaxIdle) and nothing more is built.
	if st := r.Stats(); st.Built != 3 || st.Idle != 3 {
		t.Errorf("after 3 sequential utterances: %+v, want 3 built, 3 idle", st)
	}
}

// TestPoolEqualMaxIdleBuildsOnce: with PoolMaxIdle == PoolSize (the shipped
// 8/8) sequential utterances must not free their decoder and build a
// replacement each time.
func TestPoolEqualMaxIdleBuildsOnce(t *testing.T) {
	requireModel(t)
	requireTestData(t)
	pcm := loadSet(t, "goforward")[0].pcm
	cfg := DefaultConfig()
	cfg.PoolSize, cfg.PoolMaxIdle = 2, 2
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for i := range 4 {
		if err := r.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := decode(ctx, r, pcm); err != nil {
			t.Fatalf("utterance %d: %v", i, err)
		}
	}
	if err := r.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Built != 2 || st.Idle != 2 {
		t.Errorf("after 4 sequential utterances: %+v, want 2 built, 2 idle (no replacement that would only be freed)", st)
	}
}

// TestPoolMaxIdleFrees: returned decoders beyond PoolMaxIdle are freed.
func TestPoolMaxIdleFrees(t *testing.T) {
	requireModel(t)
	cfg := DefaultConfig()
	cfg.PoolSize, cfg.PoolMaxIdle = 0, 1
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	a, err := r.Start(ctx, SampleRate)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Start(ctx, SampleRate)
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	_ = b.Close()
	if st := r.Stats(); st.Idle != 1 {
		t.Errorf("%+v: want 1 idle (PoolMaxIdle)", st)
	}
}

// TestSessionCarriesCMN: a session's next utterance starts from the mean
// its last one ended with; a new session starts from CMNInit again.
func TestSessionCarriesCMN(t *testing.T) {
	requireModel(t)
	requireTestData(t)
	pcm := loadSet(t, "goforward")[0].pcm
	cfg := DefaultConfig()
	cfg.CMNInit = "40,-5,0,5,2,-4,-1,-2,-5,-2,-6,-1,1"
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	init, _ := parseCMN(cfg.CMNInit)
	sess := r.NewSession(asr.SessionOptions{InputRate: 16000}).(*Session)
	if have := sess.CMN(); !slices.Equal(have, init) {
		t.Fatalf("new session's mean %v, want CMNInit %v", have, init)
	}
	res, err := decode(context.Background(), sess, pcm)
	if err != nil {
		t.Fatal(err)
	}
	if res.final != "go forward ten meters" {
		t.Errorf("have %q", res.final)
	}
	after := sess.CMN()
	if len(after) != len(init) || slices.Equal(after, init) {
		t.Errorf("mean after an utterance %v: want 13 values that moved from %v", after, init)
	}
	// The decoder the session used goes back to the pool; another session
	// must not inherit its mean.
	other := r.NewSession(asr.SessionOptions{}).(*Session)
	if have := other.CMN(); !slices.Equal(have, init) {
		t.Errorf("second session starts from %v, want CMNInit", have)
	}
	if err := sess.Close(); err != nil {
		t.Error(err)
	}
}

// TestCMNInitRejected: a CMNInit of the wrong length or with a non-number
// fails New with ErrConfig.
func TestCMNInitRejected(t *testing.T) {
	requireModel(t)
	for _, v := range []string{"1,2,3", "40,x"} {
		cfg := DefaultConfig()
		cfg.CMNInit = v
		if _, err := New(cfg); err == nil {
			t.Errorf("CMNInit %q accepted", v)
		}
	}
}

// TestFailedWriteFreesDecoder: a decoder whose Write failed is freed when
// the utterance ends, even though ending it succeeds: its state is unknown,
// so it must not serve the next session (it went back to the pool before).
func TestFailedWriteFreesDecoder(t *testing.T) {
	requireModel(t)
	cfg := DefaultConfig()
	cfg.PoolSize, cfg.PoolMaxIdle = 0, 2
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errFault := errors.New("injected fault")
	for _, end := range []string{"close", "cancel"} {
		t.Run(end, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := r.Start(ctx, SampleRate)
			if err != nil {
				t.Fatal(err)
			}
			r.process = func(*csphinx.Decoder, []int16) error { return errFault }
			err = st.Write(make([]int16, 320))
			r.process = (*csphinx.Decoder).ProcessRaw
			if !errors.Is(err, errFault) {
				t.Fatalf("Write: have %v, want the injected fault", err)
			}
			before := r.Stats().Idle
			if end == "close" {
				if err := st.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			} else {
				cancel()
				for range st.Results() {
				}
				// Close waits for the cancellation's cleanup (it holds the
				// stream's lock while it ends the utterance).
				_ = st.Close()
			}
			if have := r.Stats().Idle; have != before {
				t.Errorf("idle decoders %d -> %d: the failed decoder went back to the pool", before, have)
			}
		})
	}
}
