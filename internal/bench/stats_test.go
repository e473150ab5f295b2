package bench

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 48, 0, 0.0741},      // no cut-off seen: still up to 7.4%
		{6, 48, 0.0586, 0.2470}, // a bench turns run of 2026-12-03
		{24, 48, 0.3639, 0.6361},
		{48, 48, 0.9259, 1},
	} {
		lo, hi := wilson(c.k, c.n)
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("wilson(%d, %d) = %.4f-%.4f, want %.4f-%.4f", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := wilson(0, 0); lo != 0 || hi != 1 {
		t.Errorf("wilson(0, 0) = %g-%g, want 0-1 (nothing known)", lo, hi)
	}
}

// The ranks are those of the binomial order-statistic interval, checked
// against an exact computation: a p95 of 30 values is bounded below by the
// 26th and not above; of 100 values it lies between the 90th and the 100th.
func TestQuantileCI(t *testing.T) {
	ranks := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i + 1) // value = 1-based rank
		}
		return v
	}
	for _, c := range []struct {
		n      int
		p      float64
		lo, hi float64
		open   bool
	}{
		{30, 0.95, 26, 30, true},
		{71, 0.95, 63, 71, true},
		{100, 0.95, 90, 100, false},
		{200, 0.95, 184, 197, false},
		{30, 0.5, 10, 21, false},
	} {
		lo, hi, open := quantileCI(ranks(c.n), c.p)
		if lo != c.lo || hi != c.hi || open != c.open {
			t.Errorf("n %d p %g: %g-%g open %v, want %g-%g open %v", c.n, c.p, lo, hi, open, c.lo, c.hi, c.open)
		}
	}
	if lo, hi, open := quantileCI(nil, 0.95); !math.IsNaN(lo) || !math.IsNaN(hi) || !open {
		t.Errorf("empty: %g-%g open %v", lo, hi, open)
	}
}

func TestMcNemar(t *testing.T) {
	for _, c := range []struct {
		a, b int
		p    float64
	}{{0, 0, 1}, {3, 3, 1}, {0, 6, 0.03125}, {1, 5, 0.21875}, {5, 1, 0.21875}} {
		if got := mcnemarP(c.a, c.b); math.Abs(got-c.p) > 1e-9 {
			t.Errorf("mcnemarP(%d, %d) = %g, want %g", c.a, c.b, got, c.p)
		}
	}
}
