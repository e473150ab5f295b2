package bench

import "math"

// How sure a bench turns figure is. One run's 48 paused sentences gave 3
// and 6 cut-offs for the same config and seed (2026-12-03), so a rate or a
// p95 without its interval invites reading noise as a change.

// z95 is the standard normal quantile of a two-sided 95% interval.
const z95 = 1.959963984540054

// wilson is the 95% Wilson score interval of a rate of k in n; it stays
// inside [0, 1] and is honest at k = 0, where the normal one is [0, 0].
func wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	fn, p, z2 := float64(n), float64(k)/float64(n), z95*z95
	centre := (p + z2/(2*fn)) / (1 + z2/fn)
	half := z95 / (1 + z2/fn) * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	return max(0, centre-half), min(1, centre+half)
}

// binomCDF is P(B <= j) for B ~ Binomial(n, p).
func binomCDF(j, n int, p float64) float64 {
	if j < 0 {
		return 0
	}
	if j >= n {
		return 1
	}
	var sum float64
	for i := 0; i <= j; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1)
		sum += math.Exp(lg + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return min(1, sum)
}

func lgamma(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

// quantileCI is a distribution-free 95% interval for the p-quantile of the
// population sorted was drawn from: the order statistics whose ranks a
// Binomial(n, p) count falls between with 95% probability. open is true
// when n is too small for an upper bound (hi is then the largest value):
// a p95 needs 72 values before its interval closes above.
func quantileCI(sorted []float64, p float64) (lo, hi float64, open bool) {
	n := len(sorted)
	if n == 0 {
		return math.NaN(), math.NaN(), true
	}
	// Ranks are 1-based: [x_(l), x_(u)] covers the quantile with
	// probability F(u-1) - F(l-1), F the binomial CDF.
	l := 1
	for l+1 <= n && binomCDF(l, n, p) <= 0.025 {
		l++
	}
	u := n + 1
	for k := 1; k <= n; k++ {
		if binomCDF(k-1, n, p) >= 0.975 {
			u = k
			break
		}
	}
	if u > n {
		return sorted[l-1], sorted[n-1], true
	}
	return sorted[l-1], sorted[u-1], false
}

// mcnemarP is the exact two-sided p-value of McNemar's test on paired
// outcomes: a items went one way only on the first side, b only on the
// second. Under no difference each discordant item is a fair coin.
func mcnemarP(a, b int) float64 {
	if a+b == 0 {
		return 1
	}
	return min(1, 2*binomCDF(min(a, b), a+b, 0.5))
}
