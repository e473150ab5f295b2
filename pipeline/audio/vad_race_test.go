//go:build race

package audio

// raceBuild: the race detector slows the Silero network about 20 times, so
// its longest tests play less audio (make test runs with -race).
const raceBuild = true
