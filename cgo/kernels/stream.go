package kernels

import "encoding/binary"

// ReadStream reads every byte of p once, front to back, with the widest loads
// the CPU has, and returns a value that depends on all of them (so the reads
// cannot be optimised away). It is the yardstick for weight bandwidth: a
// decode step that reads W bytes of weights cannot beat W / (the time
// ReadStream takes over W bytes). A tail that is not a multiple of 128 bytes
// is read in Go.
func ReadStream(p []byte) uint64 {
	n := len(p) &^ 127
	var h uint64
	if n > 0 {
		if currentLevel() != levelGeneric {
			h = simdReadStream(p[:n])
		} else {
			h = genericReadStream(p[:n])
		}
	}
	return h ^ genericReadStream(p[n:])
}

func genericReadStream(p []byte) uint64 {
	var a, b uint64
	i := 0
	for ; i+16 <= len(p); i += 16 {
		a ^= binary.LittleEndian.Uint64(p[i:])
		b ^= binary.LittleEndian.Uint64(p[i+8:])
	}
	for ; i < len(p); i++ {
		a ^= uint64(p[i]) << (8 * (i % 8))
	}
	return a ^ b
}
