//go:build cgo && linux

package malloc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssKB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("requires /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Skip("requires VmRSS in /proc/self/status")
	return 0
}

// Memory a C library freed below a live block stays in the process until
// Trim gives it back.
func TestTrimReleasesFreedMemory(t *testing.T) {
	if !Tune(DefaultConfig()) {
		t.Fatal("mallopt refused the default settings")
	}
	base := rssKB(t)
	keep := churn(3000, 64<<10) // ~190 MB, under the mmap threshold
	defer release(keep)
	held := rssKB(t)
	if held-base < 100<<10 {
		t.Skipf("glibc returned the memory by itself (RSS %d → %d kB)", base, held)
	}
	if !Trim() {
		t.Error("Trim released nothing")
	}
	after := rssKB(t)
	t.Logf("RSS %d kB, %d after the churn, %d after Trim", base, held, after)
	if after-base > (held-base)/4 {
		t.Errorf("RSS after Trim %d kB, want near %d (it was %d)", after, base, held)
	}
}

func TestReadAndTune(t *testing.T) {
	if s := Read(); s.Arena <= 0 {
		t.Errorf("mallinfo2 arena %d", s.Arena)
	}
	if !Tune(Config{Arenas: 8}) {
		t.Error("Tune(Arenas: 8) refused")
	}
}
