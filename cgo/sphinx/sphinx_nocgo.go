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
