package xiaozhi

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// frameReader reads a device's WebSocket messages straight off the
// hijacked connection (RFC 6455 §5), into the caller's buffer, with no
// allocation per message: gorilla/websocket's reader allocates one per
// message, so the device path reads for itself and leaves gorilla the
// handshake and the writing (its WriteControl may run beside its writer).
// After the upgrade nothing is buffered (gorilla refuses clients that send
// early), so the connection's bytes start at the first frame.
type frameReader struct {
	br  *bufio.Reader
	hdr [14]byte
	// control holds a ping's or close's payload (at most 125 bytes).
	control [125]byte
}

// WebSocket opcodes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

var (
	// errProtocol is a frame that breaks RFC 6455 (close 1002).
	errProtocol = errors.New("xiaozhi: websocket protocol error")
	// errTooBig is a message longer than the buffer (close 1009); its
	// bytes have been read and dropped.
	errTooBig = errors.New("xiaozhi: message too large")
)

// maxFrameLen refuses absurd frames outright (the firmware's limit is
// 65535 bytes a message); anything under it but over the buffer is read
// and dropped as errTooBig.
const maxFrameLen = 16 << 20

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, 4096)}
}

// next returns the next data message (opText or opBinary) in buf[:n], or
// opClose with the close frame's payload in fr.control[:n]. Pings and pongs
// are handed to onControl as they come (also between a message's
// fragments). A message longer than buf gives errTooBig.
func (fr *frameReader) next(buf []byte, onControl func(op byte, payload []byte)) (op byte, n int, err error) {
	var msgOp byte // the data message being reassembled; 0 = none
	tooBig := false
	for {
		fin, op, length, mask, err := fr.header()
		if err != nil {
			return 0, 0, err
		}
		if op >= opClose {
			if !fin || length > int64(len(fr.control)) {
				return 0, 0, fmt.Errorf("%w: fragmented or %d-byte control frame", errProtocol, length)
			}
			if err := fr.payload(fr.control[:length], mask); err != nil {
				return 0, 0, err
			}
			switch op {
			case opClose:
				return op, int(length), nil
			case opPing, opPong:
				onControl(op, fr.control[:length])
				continue
			}
			return 0, 0, fmt.Errorf("%w: opcode %#x", errProtocol, op)
		}
		switch {
		case op == opContinuation && msgOp == 0:
			return 0, 0, fmt.Errorf("%w: continuation frame without a message", errProtocol)
		case (op == opText || op == opBinary) && msgOp != 0:
			return 0, 0, fmt.Errorf("%w: new message inside a fragmented one", errProtocol)
		case op != opContinuation && op != opText && op != opBinary:
			return 0, 0, fmt.Errorf("%w: opcode %#x", errProtocol, op)
		}
		if msgOp == 0 {
			msgOp = op
		}
		if tooBig || int64(n)+length > int64(len(buf)) {
			tooBig = true
			if _, err := fr.br.Discard(int(min(length, 1<<31-1))); err != nil {
				return 0, 0, err
			}
		} else {
			if err := fr.payload(buf[n:n+int(length)], mask); err != nil {
				return 0, 0, err
			}
			n += int(length)
		}
		if fin {
			if tooBig {
				return msgOp, 0, errTooBig
			}
			return msgOp, n, nil
		}
	}
}

// header reads one frame header; client frames must be masked and use no
// extension bits.
func (fr *frameReader) header() (fin bool, op byte, length int64, mask [4]byte, err error) {
	h := fr.hdr[:2]
	if _, err = io.ReadFull(fr.br, h); err != nil {
		return
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0f
	if h[0]&0x70 != 0 {
		err = fmt.Errorf("%w: reserved bits set (no extension was negotiated)", errProtocol)
		return
	}
	if h[1]&0x80 == 0 {
		err = fmt.Errorf("%w: unmasked client frame", errProtocol)
		return
	}
	switch l := h[1] & 0x7f; l {
	case 126:
		if _, err = io.ReadFull(fr.br, fr.hdr[2:4]); err != nil {
			return
		}
		length = int64(binary.BigEndian.Uint16(fr.hdr[2:4]))
	case 127:
		if _, err = io.ReadFull(fr.br, fr.hdr[2:10]); err != nil {
			return
		}
		u := binary.BigEndian.Uint64(fr.hdr[2:10])
		if u > maxFrameLen {
			err = fmt.Errorf("%w: frame length %d", errProtocol, u)
			return
		}
		length = int64(u)
	default:
		length = int64(l)
	}
	// Read into fr.hdr, not mask: a local handed to an io.Reader escapes.
	if _, err = io.ReadFull(fr.br, fr.hdr[10:14]); err != nil {
		return
	}
	mask = [4]byte(fr.hdr[10:14])
	return
}

// payload reads len(dst) bytes and unmasks them.
func (fr *frameReader) payload(dst []byte, mask [4]byte) error {
	if _, err := io.ReadFull(fr.br, dst); err != nil {
		return err
	}
	for i := range dst {
		dst[i] ^= mask[i&3]
	}
	return nil
}
