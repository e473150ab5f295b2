package mcp

import (
	"strconv"
)

// maxNameLen is OpenAI's (and Ark's) bound on a function name.
const maxNameLen = 64

// sanitize makes name fit ^[a-zA-Z0-9_-]{1,64}$: every other byte becomes
// '_' (so "self.audio.set_volume" is "self_audio_set_volume" and a
// multi-byte character becomes several '_'), cut to 64 bytes.
func sanitize(name string) string {
	if name == "" {
		return "tool"
	}
	b := []byte(name)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > maxNameLen {
		b = b[:maxNameLen]
	}
	return string(b)
}

// unique returns name, or name with a "_2", "_3"… suffix (within 64
// bytes) when taken already has it, and marks the result taken. Two tools
// can still meet after sanitising ("a.b" and "a_b") or after prefixing.
func unique(name string, taken map[string]bool) string {
	out := name
	for n := 2; taken[out]; n++ {
		suffix := "_" + strconv.Itoa(n)
		base := name
		if len(base)+len(suffix) > maxNameLen {
			base = base[:maxNameLen-len(suffix)]
		}
		out = base + suffix
	}
	taken[out] = true
	return out
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
