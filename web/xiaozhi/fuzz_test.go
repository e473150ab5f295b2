package xiaozhi

import (
	"encoding/binary"
	"testing"
)

// FuzzParseDeviceMessage: any text frame parses or is refused with an
// error wrapping errMessage; never a panic; an accepted hello names a
// framing version the server can speak and an accepted listen a known state.
func FuzzParseDeviceMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","version":1,"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}`,
		`{"type":"hello","version":"3","features":{"mcp":"true"}}`,
		`{"type":"listen","state":"start","mode":"manual"}`,
		`{"type":"abort","reason":"wake_word_detected"}`,
		`{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}`,
		`{"type":5}`, `[]`, `{"type":"hello","version":1e9}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseDeviceMessage(data)
		if err != nil {
			return
		}
		switch m.Type {
		case "":
			t.Fatalf("accepted %q without a type", data)
		case typeHello:
			if v := int(m.Version); v < 0 || v > 3 {
				t.Fatalf("accepted hello version %d", v)
			}
		case typeListen:
			if m.State != listenStart && m.State != listenStop && m.State != listenDetect {
				t.Fatalf("accepted listen state %q", m.State)
			}
		}
	})
}

// FuzzParseFrame: any binary frame under any version yields a payload
// inside the message (the header's size trusted only as far as the bytes
// go) or an error; never a panic. Writing a header and parsing it back
// round-trips.
func FuzzParseFrame(f *testing.F) {
	f.Add(1, []byte{0xf8, 0xff, 0xfe})
	f.Add(2, v2Frame([]byte{1, 2, 3}, 77))
	f.Add(3, v3Frame([]byte{1, 2, 3}))
	f.Add(3, []byte{0, 0, 0xff, 0xff, 1})
	f.Add(2, []byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, version int, msg []byte) {
		payload, _, err := parseFrame(version, msg)
		if err != nil {
			return
		}
		if len(payload) > len(msg) {
			t.Fatalf("payload of %d bytes from a %d-byte message", len(payload), len(msg))
		}
		if version != 2 && version != 3 {
			return
		}
		hl := headerLen(version)
		if version == 3 && len(payload) > 0xffff {
			return
		}
		buf := make([]byte, hl+len(payload))
		putHeader(version, buf, len(payload), 1234)
		copy(buf[hl:], payload)
		back, ts, err := parseFrame(version, buf)
		if err != nil || string(back) != string(payload) || (version == 2 && ts != 1234) {
			t.Fatalf("round trip v%d: %v, %d bytes back of %d, ts %d", version, err, len(back), len(payload), ts)
		}
		if version == 2 && binary.BigEndian.Uint16(buf) != 2 {
			t.Fatal("v2 header without its version")
		}
	})
}
