//go:build !cgo

package sphinx

import (
	"errors"
	"testing"
)

func TestNoCgo(t *testing.T) {
	d, err := NewDecoder([]string{"-hmm", "/x"})
	if !errors.Is(err, ErrNoCgo) || d != nil {
		t.Fatalf("have %v, %v; want nil, ErrNoCgo", d, err)
	}
}
