package voiceclient

import (
	"fmt"
	"os"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// LoadWAV reads a PCM16 WAV file (any rate, mono or more channels) and
// returns it mono at rate.
func LoadWAV(path string, rate int) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := audio.DecodeWAV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pcm := w.Mono()
	if w.SampleRate == rate {
		return pcm, nil
	}
	r, err := audio.NewResampler(w.SampleRate, rate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A few ms of zeros flush the filter's delay.
	pcm = append(pcm, make([]int16, w.SampleRate/100)...)
	return append([]int16(nil), r.Process(nil, pcm)...), nil
}

// SaveWAV writes mono pcm at rate to path.
func SaveWAV(path string, pcm []int16, rate int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := audio.EncodeWAV(f, pcm, rate, 1); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
