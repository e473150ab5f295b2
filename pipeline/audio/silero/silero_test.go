package silero

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxpipe/voxpipe/models"
)

// readReference loads testdata/input.raw and the probabilities ONNX Runtime
// gave for it (testdata/reference.sh).
func readReference(t testing.TB) ([]float32, []float32) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "input.raw"))
	if err != nil {
		t.Skipf("reference audio not found: %v", err)
	}
	j, err := os.ReadFile(filepath.Join("testdata", "reference.json"))
	if err != nil {
		t.Skipf("reference probabilities not found: %v", err)
	}
	var ref struct{ Probs []float32 }
	if err := json.Unmarshal(j, &ref); err != nil {
		t.Fatal(err)
	}
	pcm := make([]float32, len(b)/2)
	for i := range pcm {
		pcm[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:]))) / 32768
	}
	return pcm, ref.Probs
}

func TestMatchesONNXRuntime(t *testing.T) {
	pcm, want := readReference(t)
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(pcm)/WindowSize {
		t.Fatalf("%d reference probabilities for %d windows", len(want), len(pcm)/WindowSize)
	}
	d := m.NewDetector()
	var worst float64
	speech := 0
	for i, w := range want {
		p, err := d.Window(pcm[i*WindowSize : (i+1)*WindowSize])
		if err != nil {
			t.Fatal(err)
		}
		diff := math.Abs(float64(p - w))
		worst = max(worst, diff)
		if diff > 1e-4 {
			t.Errorf("window %d: p=%.5f, ONNX Runtime %.5f", i, p, w)
		}
		if w > 0.5 {
			speech++
		}
	}
	t.Logf("%d windows (%d speech), largest difference %.2g", len(want), speech, worst)
	// The reference itself must tell speech from the rest, or the
	// comparison proves little.
	if speech < len(want)/4 || speech > 3*len(want)/4 {
		t.Errorf("%d of %d reference windows are speech: not a mix of speech and non-speech", speech, len(want))
	}

	// Reset makes the stream start over: the first window again.
	d.Reset()
	p, _ := d.Window(pcm[:WindowSize])
	if math.Abs(float64(p-want[0])) > 1e-4 {
		t.Errorf("after Reset: p=%.5f, want %.5f", p, want[0])
	}
}

func TestWindowSize(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewDetector().Window(make([]float32, 320)); !errors.Is(err, ErrWindow) {
		t.Errorf("320 samples: err %v, want ErrWindow", err)
	}
}

func TestParseRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": models.SileroVAD[:len(models.SileroVAD)/2],
		"not onnx":  []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
		"no graph":  {0x08, 0x07}, // ir_version 7 only
	} {
		if _, err := Parse(b); !errors.Is(err, ErrModel) {
			t.Errorf("%s: err %v, want ErrModel", name, err)
		}
	}
}

func BenchmarkWindow(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	d := m.NewDetector()
	w := make([]float32, WindowSize)
	for i := range w {
		w[i] = 0.1 * float32(math.Sin(float64(i)*0.05))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Window(w); err != nil {
			b.Fatal(err)
		}
	}
}
