package audio

// ValidOpusRate reports whether libopus can encode or decode at rate.
func ValidOpusRate(rate int) bool {
	switch rate {
	case 8000, 12000, 16000, 24000, 48000:
		return true
	}
	return false
}

// validOpusFrame reports whether n samples at rate is an Opus frame
// duration: 2.5, 5, 10, 20, 40 or 60 ms.
func validOpusFrame(rate, n int) bool {
	if n <= 0 {
		return false
	}
	for _, tenthsMs := range [...]int{25, 50, 100, 200, 400, 600} {
		if n == rate*tenthsMs/10000 {
			return true
		}
	}
	return false
}
