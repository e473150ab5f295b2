// Package volcproto is the binary frame Volcengine's streaming speech
// services (ASR "sauc", TTS v1 and v3) put in WebSocket binary messages:
//
//	byte 0: version (high nibble, 1) | header size in 4-byte words (low nibble)
//	byte 1: message type             | flags (bit 0 sequence, bit 1 last, bit 2 event)
//	byte 2: serialization            | compression (0 none, 1 gzip)
//	byte 3: reserved
//	[header extension] [int32 sequence] [int32 event [uint32 id size, id]]
//	uint32 payload size, payload               (error frames: uint32 code first)
//
// Integers are big-endian; the payload size is the compressed size. The
// facts and their sources are in ../shared/docs/volcengine-protocols.md,
// section 2. Frames are parsed by flag bits, never by whole flag values,
// since official clients combine them differently.
package volcproto

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Message types (high nibble of byte 1).
const (
	TypeFullClient  = 0x1 // JSON parameters, client → server
	TypeAudioClient = 0x2 // audio, client → server
	TypeFullServer  = 0x9 // JSON response, server → client
	TypeAudioServer = 0xB // audio (or an ACK), server → client
	TypeFrontEnd    = 0xC // TTS v1 front-end result (JSON)
	TypeError       = 0xF // error code and message
)

// Flag bits (low nibble of byte 1).
const (
	FlagSeq   = 0x1 // an int32 sequence follows the header
	FlagLast  = 0x2 // the last packet of the stream
	FlagEvent = 0x4 // an int32 event (TTS v3) follows
)

// Serialization and compression (byte 2).
const (
	SerialRaw  = 0x0
	SerialJSON = 0x1
	CompNone   = 0x0
	CompGzip   = 0x1
)

// MaxPayload bounds a payload, before and after decompression.
const MaxPayload = 16 << 20

// Frame is one message. Payload is uncompressed: Encode compresses it when
// Comp is CompGzip, Decode decompresses it.
type Frame struct {
	Type   byte
	Flags  byte
	Serial byte
	Comp   byte
	Seq    int32  // when Flags has FlagSeq (negative on the last packet)
	Event  int32  // when Flags has FlagEvent
	ID     string // the event's connection or session id (see HasID)
	Code   uint32 // error frames
	// Payload is the message; Encode compresses it when Comp is gzip.
	Payload []byte
}

// Last reports whether f ends the stream: the last-packet flag, or a
// negative sequence.
func (f *Frame) Last() bool {
	return f.Flags&FlagLast != 0 || (f.Flags&FlagSeq != 0 && f.Seq < 0)
}

// HasID says whether a TTS v3 event carries an id: StartConnection (1) and
// FinishConnection (2) carry none; every other event carries a connection
// id (50-52) or a session id. The doc's table for ConnectionFailed (51)
// contradicts itself; this follows the official demo's parser, which reads
// an id there too [?].
func HasID(event int32) bool { return event != 1 && event != 2 }

// Errors of Decode.
var (
	ErrShort   = errors.New("volcproto: frame too short")
	ErrVersion = errors.New("volcproto: unknown protocol version")
	ErrSize    = errors.New("volcproto: size field out of range")
)

// gzipWriters are reused: a new writer allocates ~800 KB of compressor
// state, and the ASR gzips a packet every 200 ms per session. BestSpeed:
// PCM hardly compresses, so a higher level only costs CPU.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// Encode builds the bytes of f (header size 1 word, version 1).
func Encode(f Frame) ([]byte, error) {
	payload := f.Payload
	if f.Comp == CompGzip {
		var buf bytes.Buffer
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(&buf)
		_, err := zw.Write(payload)
		if err == nil {
			err = zw.Close()
		}
		gzipWriters.Put(zw)
		if err != nil {
			return nil, err
		}
		payload = buf.Bytes()
	}
	if len(payload) > MaxPayload || len(f.ID) > MaxPayload {
		return nil, ErrSize
	}
	b := make([]byte, 0, 4+16+len(f.ID)+len(payload))
	b = append(b, 0x11, f.Type<<4|f.Flags&0xF, f.Serial<<4|f.Comp&0xF, 0)
	if f.Type == TypeError {
		b = binary.BigEndian.AppendUint32(b, f.Code)
	} else {
		if f.Flags&FlagSeq != 0 {
			b = binary.BigEndian.AppendUint32(b, uint32(f.Seq))
		}
		if f.Flags&FlagEvent != 0 {
			b = binary.BigEndian.AppendUint32(b, uint32(f.Event))
			if HasID(f.Event) {
				b = binary.BigEndian.AppendUint32(b, uint32(len(f.ID)))
				b = append(b, f.ID...)
			}
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...), nil
}

// Decode parses one message. The payload is decompressed when byte 2 says
// gzip. A type-11 frame with no flags is an ACK: nothing follows its header.
func Decode(b []byte) (Frame, error) {
	var f Frame
	if len(b) < 4 {
		return f, ErrShort
	}
	if b[0]>>4 != 1 {
		return f, fmt.Errorf("%w %d", ErrVersion, b[0]>>4)
	}
	hdr := int(b[0]&0xF) * 4
	if hdr < 4 {
		return f, fmt.Errorf("%w: header size 0", ErrSize)
	}
	if len(b) < hdr {
		return f, ErrShort
	}
	f.Type, f.Flags = b[1]>>4, b[1]&0xF
	f.Serial, f.Comp = b[2]>>4, b[2]&0xF
	r := reader{b: b[hdr:]}
	if f.Type == TypeError {
		f.Code = r.u32()
	} else {
		if f.Flags&FlagSeq != 0 {
			f.Seq = int32(r.u32())
		}
		if f.Flags&FlagEvent != 0 {
			f.Event = int32(r.u32())
			if HasID(f.Event) {
				f.ID = string(r.bytes(r.u32()))
			}
		}
		if f.Type == TypeAudioServer && f.Flags == 0 && len(r.b) == 0 && r.err == nil {
			return f, nil // an ACK
		}
	}
	payload := r.bytes(r.u32())
	if r.err != nil {
		return Frame{}, r.err
	}
	if f.Comp == CompGzip {
		var err error
		if payload, err = gunzip(payload); err != nil {
			return Frame{}, err
		}
	} else {
		payload = bytes.Clone(payload)
	}
	f.Payload = payload
	return f, nil
}

func gunzip(p []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, fmt.Errorf("volcproto: gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("volcproto: gzip: %w", err)
	}
	if len(out) > MaxPayload {
		return nil, fmt.Errorf("%w: payload over %d bytes uncompressed", ErrSize, MaxPayload)
	}
	return out, nil
}

// reader consumes big-endian fields; the first short read sticks in err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.err = ErrShort
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: %d bytes announced, %d left", ErrSize, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// ServerError is a type-15 frame, or a failure code in a JSON response.
type ServerError struct {
	Service string // "volc asr", "volc tts"
	Code    uint32
	Message string
}

func (e *ServerError) Error() string {
	s := fmt.Sprintf("%s: server error %d", e.Service, e.Code)
	if m := Meaning(e.Code); m != "" {
		s += " (" + m + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Meaning names the documented codes of the speech services (doc sections
// 3.1, 4.1, 4.2).
func Meaning(code uint32) string {
	switch {
	case code == 45000001:
		return "invalid request parameters"
	case code == 45000002:
		return "empty audio"
	case code == 45000081:
		return "timed out waiting for audio"
	case code == 45000151:
		return "bad audio format"
	case code == 55000031:
		return "server busy"
	case code/100000 == 450:
		return "client error"
	case code/100000 == 550:
		return "server error, retryable"
	case code == 3001:
		return "invalid request"
	case code == 3003:
		return "concurrency limit"
	case code == 3005:
		return "server busy"
	case code == 3010:
		return "text too long"
	case code == 3011:
		return "invalid text"
	case code == 3030, code == 3031:
		return "processing error, retryable"
	case code == 3050:
		return "voice does not exist"
	}
	return ""
}
