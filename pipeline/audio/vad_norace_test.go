//go:build !race

package audio

// raceBuild: see vad_race_test.go.
const raceBuild = false
