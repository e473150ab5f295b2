package xiaozhi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Binary framing versions (reference §5.1). Version 1 is one raw Opus
// packet per binary message; 2 and 3 put a header before it. The version
// applies to both directions. Every integer is big-endian.
const (
	v2HeaderLen = 16 // version u16, type u16, reserved u32, timestamp u32, payload_size u32
	v3HeaderLen = 4  // type u8, reserved u8, payload_size u16
	typeOpus    = 0
)

// errFrame is the reason a binary message was refused.
var errFrame = errors.New("xiaozhi: bad binary frame")

// parseFrame returns the Opus payload of one binary message under version
// (and, for v2, the device's timestamp). The payload aliases msg.
func parseFrame(version int, msg []byte) (payload []byte, timestamp uint32, err error) {
	switch version {
	case 2:
		if len(msg) < v2HeaderLen {
			return nil, 0, fmt.Errorf("%w: %d bytes, shorter than the 16-byte v2 header", errFrame, len(msg))
		}
		if v := binary.BigEndian.Uint16(msg); v != 2 {
			return nil, 0, fmt.Errorf("%w: v2 header says version %d", errFrame, v)
		}
		if t := binary.BigEndian.Uint16(msg[2:]); t != typeOpus {
			return nil, 0, fmt.Errorf("%w: v2 payload type %d (want 0, opus)", errFrame, t)
		}
		size := binary.BigEndian.Uint32(msg[12:])
		if uint64(size) > uint64(len(msg)-v2HeaderLen) {
			return nil, 0, fmt.Errorf("%w: v2 payload_size %d, but %d bytes follow the header", errFrame, size, len(msg)-v2HeaderLen)
		}
		return msg[v2HeaderLen : v2HeaderLen+int(size)], binary.BigEndian.Uint32(msg[8:]), nil
	case 3:
		if len(msg) < v3HeaderLen {
			return nil, 0, fmt.Errorf("%w: %d bytes, shorter than the 4-byte v3 header", errFrame, len(msg))
		}
		if msg[0] != typeOpus {
			return nil, 0, fmt.Errorf("%w: v3 payload type %d (want 0, opus)", errFrame, msg[0])
		}
		size := int(binary.BigEndian.Uint16(msg[2:]))
		if size > len(msg)-v3HeaderLen {
			return nil, 0, fmt.Errorf("%w: v3 payload_size %d, but %d bytes follow the header", errFrame, size, len(msg)-v3HeaderLen)
		}
		return msg[v3HeaderLen : v3HeaderLen+size], 0, nil
	}
	return msg, 0, nil
}

// headerLen is the header size of version.
func headerLen(version int) int {
	switch version {
	case 2:
		return v2HeaderLen
	case 3:
		return v3HeaderLen
	}
	return 0
}

// putHeader writes version's header for a payload of n bytes into
// dst[:headerLen(version)].
func putHeader(version int, dst []byte, n int, timestamp uint32) {
	switch version {
	case 2:
		binary.BigEndian.PutUint16(dst, 2)
		binary.BigEndian.PutUint16(dst[2:], typeOpus)
		binary.BigEndian.PutUint32(dst[4:], 0)
		binary.BigEndian.PutUint32(dst[8:], timestamp)
		binary.BigEndian.PutUint32(dst[12:], uint32(n))
	case 3:
		dst[0], dst[1] = typeOpus, 0
		binary.BigEndian.PutUint16(dst[2:], uint16(n))
	}
}
