//go:build !cgo

package sphinx

// Decoder is the cgo-less stand-in: NewDecoder always fails with ErrNoCgo.
type Decoder struct{}

// NewDecoder returns ErrNoCgo: pocketsphinx needs cgo.
func NewDecoder(args []string) (*Decoder, error) { return nil, ErrNoCgo }

// StartUtt returns ErrNoCgo.
func (d *Decoder) StartUtt() error { return ErrNoCgo }

// ProcessRaw returns ErrNoCgo.
func (d *Decoder) ProcessRaw(pcm []int16) error { return ErrNoCgo }

// Hyp returns "".
func (d *Decoder) Hyp() string { return "" }

// AppendHyp returns dst unchanged.
func (d *Decoder) AppendHyp(dst []byte) []byte { return dst }

// InSpeech returns false.
func (d *Decoder) InSpeech() bool { return false }

// EndUtt returns ErrNoCgo.
func (d *Decoder) EndUtt() error { return ErrNoCgo }

// Close does nothing.
func (d *Decoder) Close() error { return nil }

// CMNLen returns 0.
func (d *Decoder) CMNLen() int { return 0 }

// CMN returns dst unchanged.
func (d *Decoder) CMN(dst []float32) []float32 { return dst }

// SetCMN returns ErrNoCgo.
func (d *Decoder) SetCMN(vec []float32) error { return ErrNoCgo }

// NBest returns ErrNoCgo.
func (d *Decoder) NBest(n, maxPaths int) ([]NBestHyp, error) { return nil, ErrNoCgo }

// SetCMNWeight returns ErrNoCgo.
func (d *Decoder) SetCMNWeight(frames int) error { return ErrNoCgo }

// RefreshCMN does nothing.
func (d *Decoder) RefreshCMN() {}
