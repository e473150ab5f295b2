package xiaozhi

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// clientFrame builds one masked client frame (RFC 6455 §5.2).
func clientFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	f := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f = append(f, key[:]...)
	for i, p := range payload {
		f = append(f, p^key[i%4])
	}
	return f
}

func TestFrameReader(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 70000)
	var stream []byte
	stream = append(stream, clientFrame(true, opText, []byte(`{"type":"hello"}`))...)
	stream = append(stream, clientFrame(false, opBinary, []byte{1, 2})...)
	stream = append(stream, clientFrame(true, opPing, []byte("hi"))...) // between fragments
	stream = append(stream, clientFrame(true, opContinuation, []byte{3})...)
	stream = append(stream, clientFrame(true, opBinary, big[:300])...) // 16-bit length
	stream = append(stream, clientFrame(true, opBinary, big)...)       // 64-bit length, over the buffer
	stream = append(stream, clientFrame(true, opBinary, []byte{9})...) // still in step after it
	stream = append(stream, clientFrame(true, opClose, []byte{0x03, 0xe8})...)
	fr := newFrameReader(bytes.NewReader(stream))
	buf := make([]byte, 4096)
	var pings []string
	on := func(op byte, p []byte) {
		if op == opPing {
			pings = append(pings, string(p))
		}
	}
	for i, want := range []struct {
		op   byte
		data string
		err  error
	}{
		{opText, `{"type":"hello"}`, nil},
		{opBinary, "\x01\x02\x03", nil},
		{opBinary, string(big[:300]), nil},
		{opBinary, "", errTooBig},
		{opBinary, "\x09", nil},
		{opClose, "\x03\xe8", nil},
	} {
		op, n, err := fr.next(buf, on)
		if !errors.Is(err, want.err) || (err == nil && op != want.op) {
			t.Fatalf("message %d: op %#x, %v; want op %#x, %v", i, op, err, want.op, want.err)
		}
		got := string(buf[:n])
		if op == opClose {
			got = string(fr.control[:n])
		}
		if err == nil && got != want.data {
			t.Fatalf("message %d: %d bytes, want %d", i, len(got), len(want.data))
		}
	}
	if len(pings) != 1 || pings[0] != "hi" {
		t.Errorf("pings %q", pings)
	}
	if _, _, err := fr.next(buf, on); !errors.Is(err, io.EOF) {
		t.Errorf("after the stream: %v, want EOF", err)
	}

	for name, frame := range map[string][]byte{
		"unmasked":          {0x82, 0x01, 0x00},
		"reserved bits":     append([]byte{0xc2}, clientFrame(true, opBinary, []byte{1})[1:]...),
		"bare continuation": clientFrame(true, opContinuation, []byte{1}),
		"fragmented ping":   clientFrame(false, opPing, nil),
		"long control":      clientFrame(true, opPing, bytes.Repeat([]byte{1}, 126)),
		"unknown opcode":    clientFrame(true, 0x3, nil),
		"message in message": append(clientFrame(false, opBinary, []byte{1}),
			clientFrame(true, opText, []byte{2})...),
	} {
		fr := newFrameReader(bytes.NewReader(frame))
		if _, _, err := fr.next(buf, on); !errors.Is(err, errProtocol) {
			t.Errorf("%s: %v, want a protocol error", name, err)
		}
	}
}

// FuzzFrameReader: any byte stream yields messages within the buffer, a
// protocol or size error, or EOF; never a panic or a read past the buffer.
func FuzzFrameReader(f *testing.F) {
	f.Add(clientFrame(true, opBinary, []byte{1, 2, 3}))
	f.Add(append(clientFrame(false, opText, []byte("{")), clientFrame(true, opContinuation, []byte("}"))...))
	f.Add([]byte{0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data))
		buf := make([]byte, 64)
		for range 100 {
			op, n, err := fr.next(buf, func(byte, []byte) {})
			if err != nil {
				return
			}
			if n > len(buf) || (op != opText && op != opBinary && op != opClose) {
				t.Fatalf("op %#x, %d bytes", op, n)
			}
		}
	})
}
