package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/rs/zerolog"
)

// lockedBuffer is a log sink the session's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestEveryLogLineCarriesSessionAndTurn: at debug level, every line a
// session writes over two turns names the session and the turn (0 before
// the first), and lines of the second turn say 2.
func TestEveryLogLineCarriesSessionAndTurn(t *testing.T) {
	var sink lockedBuffer
	harnessLog = zerolog.New(&sink).Level(zerolog.DebugLevel)
	defer func() { harnessLog = zerolog.Nop() }()
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"what time is it", "and tomorrow"}, answer("It is noon."), answer("Noon again."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		h.until("first trace", isEvent(EventTrace))
		h.utterance()
		h.until("second trace", isEvent(EventTrace))
		h.close()
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	turns := map[float64]int{}
	sc := bufio.NewScanner(&sink.b)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		turn, ok := line["turn"].(float64)
		if line["session"] != "test" || !ok {
			t.Errorf("log line without session and turn: %s", sc.Text())
			continue
		}
		if bytes.Count(sc.Bytes(), []byte(`"turn":`)) != 1 {
			t.Errorf("turn given twice: %s", sc.Text())
		}
		turns[turn]++
	}
	if turns[1] == 0 || turns[2] == 0 {
		t.Errorf("lines per turn %v, want some for turns 1 and 2", turns)
	}
}
