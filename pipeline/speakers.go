package pipeline

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// MaxDeviceIDBytes bounds a device id (Config.Device): longer ones are a
// client error at the transports and never remembered.
const MaxDeviceIDBytes = 128

// CheckDevice reports an over-long device id; the transports refuse the
// client with its message.
func CheckDevice(id string) error {
	if len(id) > MaxDeviceIDBytes {
		return fmt.Errorf("device id of %d bytes (at most %d)", len(id), MaxDeviceIDBytes)
	}
	return nil
}

// SpeakerMemory remembers, per client device, the pitch range of the person
// last heard at it, so that the device's next session can read the
// intonation of its first turn (audio.Intonation.Recall): on its own a
// session needs 1 s of voiced speech before the end of a phrase can be
// placed in the speaker's range, and a smart speaker's conversations are
// often a single question. What is kept is a histogram of pitch (80
// numbers) per device id, in memory only; it is forgotten after the TTL or
// when more devices than the limit were heard since. Safe for concurrent
// use.
type SpeakerMemory struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	now     func() time.Time
	devices map[string]*list.Element // of *speakerEntry
	recent  list.List                // most recently remembered first
}

type speakerEntry struct {
	device string
	pitch  audio.PitchProfile
	at     time.Time
}

// NewSpeakerMemory keeps the profiles of up to maxDevices devices for ttl
// each; it returns nil (remember nothing) when either is not positive.
func NewSpeakerMemory(maxDevices int, ttl time.Duration) *SpeakerMemory {
	if maxDevices <= 0 || ttl <= 0 {
		return nil
	}
	return &SpeakerMemory{max: maxDevices, ttl: ttl, now: time.Now, devices: make(map[string]*list.Element)}
}

// Recall returns the profile remembered for device, if any and not expired.
func (m *SpeakerMemory) Recall(device string) (audio.PitchProfile, bool) {
	if m == nil || device == "" {
		return audio.PitchProfile{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.devices[device]
	if !ok {
		return audio.PitchProfile{}, false
	}
	e := el.Value.(*speakerEntry)
	if m.now().Sub(e.at) > m.ttl {
		m.recent.Remove(el)
		delete(m.devices, device)
		return audio.PitchProfile{}, false
	}
	return e.pitch, true
}

// Remember stores device's profile, replacing the one before; a profile of
// under 0.4 s of voice (not Heard), an empty or over-long id are ignored.
func (m *SpeakerMemory) Remember(device string, p audio.PitchProfile) {
	if m == nil || device == "" || len(device) > MaxDeviceIDBytes || !p.Heard() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if el, ok := m.devices[device]; ok {
		e := el.Value.(*speakerEntry)
		e.pitch, e.at = p, now
		m.recent.MoveToFront(el)
		return
	}
	m.devices[device] = m.recent.PushFront(&speakerEntry{device: device, pitch: p, at: now})
	for m.recent.Len() > m.max {
		old := m.recent.Back()
		m.recent.Remove(old)
		delete(m.devices, old.Value.(*speakerEntry).device)
	}
}

// Len is the number of devices remembered (expired ones included until
// they are looked up or pushed out).
func (m *SpeakerMemory) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recent.Len()
}
