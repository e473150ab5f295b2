package quant

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// StreamTensor is one tensor of a streamed GGUF file. Emit must write exactly the tensor's bytes
// (gguf.TensorInfo.Bytes of its shape and type) to w, typically a row at a time.
type StreamTensor struct {
	Name string
	Type gguf.Type
	Dims []uint64
	Emit func(w io.Writer) error
}

// WriteStreamed writes a GGUF file to path with the metadata already set on meta (which must hold
// no tensors) and the tensors' data produced by their Emit functions in order, so a whole model
// never has to sit in memory. alignment must equal meta's general.alignment (gguf.DefaultAlignment
// when unset).
//
// gguf.Writer keeps tensor data in memory, so the header is produced by running it over read-only
// zero pages (an anonymous mapping costs no memory) and keeping only the bytes before the data.
func WriteStreamed(path string, meta *gguf.Writer, alignment uint64, tensors []StreamTensor) (err error) {
	var maxBytes, dataBytes uint64
	infos := make([]gguf.TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = gguf.TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type}
		b := infos[i].Bytes()
		maxBytes = max(maxBytes, b)
		dataBytes += alignUp(b, alignment)
	}
	zeros, release, err := zeroRegion(maxBytes)
	if err != nil {
		return err
	}
	defer release()
	for i, t := range tensors {
		meta.AddTensor(t.Name, t.Type, t.Dims, zeros[:infos[i].Bytes()])
	}
	total, err := meta.WriteTo(io.Discard)
	if err != nil {
		return fmt.Errorf("quant: gguf header for %s: %w", path, err)
	}
	headerLen := uint64(total) - dataBytes

	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	defer func() {
		if cerr := fh.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("quant: close %s: %w", tmp, cerr)
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(fh, 1<<20)
	if _, err := meta.WriteTo(&prefixWriter{w: bw, left: headerLen}); err != nil {
		return fmt.Errorf("quant: write %s header: %w", path, err)
	}
	var pad [64]byte
	for i, t := range tensors {
		cw := &countWriter{w: bw}
		if err := t.Emit(cw); err != nil {
			return fmt.Errorf("quant: tensor %s: %w", t.Name, err)
		}
		if want := infos[i].Bytes(); cw.n != want {
			return fmt.Errorf("quant: tensor %s wrote %d bytes, its shape needs %d: %w", t.Name, cw.n, want, ErrTensorSize)
		}
		for n := alignUp(cw.n, alignment) - cw.n; n > 0; {
			k := min(n, uint64(len(pad)))
			if _, err := bw.Write(pad[:k]); err != nil {
				return fmt.Errorf("quant: write %s: %w", path, err)
			}
			n -= k
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("quant: write %s: %w", path, err)
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// prefixWriter passes on the first left bytes and swallows the rest.
type prefixWriter struct {
	w    io.Writer
	left uint64
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if p.left > 0 {
		k := min(uint64(len(b)), p.left)
		if _, err := p.w.Write(b[:k]); err != nil {
			return 0, err
		}
		p.left -= k
	}
	return len(b), nil
}

type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += uint64(n)
	return n, err
}
