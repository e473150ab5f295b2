package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// TextStream turns generated tokens into text incrementally. It holds back
// bytes of an incomplete UTF-8 character until the character completes, and
// replaces each byte that can never form a character with U+FFFD, so the
// concatenated output does not depend on how tokens split characters.
// Like llama.cpp's detokenizer, a SentencePiece model's first token loses
// its leading space (the one the encoder prefixed).
type TextStream struct {
	t       *Tokenizer
	pending []byte
	started bool
	out     strings.Builder
}

// NewStream returns a detokeniser for one generated sequence.
func (t *Tokenizer) NewStream() *TextStream { return &TextStream{t: t} }

// Add appends a token and returns the newly completed text ("" if none).
func (s *TextStream) Add(id int32) string {
	piece := s.t.Piece(id)
	if !s.started {
		s.started = true
		if s.t.kind == kindSPM && s.t.addSpacePrefix && strings.HasPrefix(piece, " ") {
			piece = piece[1:]
		}
	}
	if len(s.pending) == 0 && utf8.ValidString(piece) {
		return piece // fast path: nothing held back, nothing to repair
	}
	s.pending = append(s.pending, piece...)
	return s.drain(false)
}

// Flush returns what is held back (incomplete characters as U+FFFD).
func (s *TextStream) Flush() string { return s.drain(true) }

func (s *TextStream) drain(final bool) string {
	s.out.Reset()
	i := 0
	for i < len(s.pending) {
		rest := s.pending[i:]
		if !final && !utf8.FullRune(rest) {
			break
		}
		r, n := utf8.DecodeRune(rest)
		if r == utf8.RuneError && n <= 1 {
			s.out.WriteRune(utf8.RuneError)
			i++
			continue
		}
		s.out.Write(rest[:n])
		i += n
	}
	s.pending = append(s.pending[:0], s.pending[i:]...)
	return s.out.String()
}
