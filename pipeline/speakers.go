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
//
// It also keeps the profiles of the last few voices heard, device or not,
// with no id: a session nobody remembers borrows the one of its register
// (audio.Intonation.RecallRegister).
type SpeakerMemory struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	now     func() time.Time
	devices map[string]*list.Element // of *speakerEntry
	recent  list.List                // most recently remembered first
	voices  []speakerEntry           // a ring of the last len(voices) voices heard; device ""
	nvoices int                      // profiles put in the ring so far
}

type speakerEntry struct {
	device string
	pitch  audio.PitchProfile
	at     time.Time
}

// NewSpeakerMemory keeps the profiles of up to maxDevices devices and of
// the last voices sessions for ttl each; it returns nil (remember nothing)
// when ttl or both counts are not positive.
func NewSpeakerMemory(maxDevices, voices int, ttl time.Duration) *SpeakerMemory {
	if (maxDevices <= 0 && voices <= 0) || ttl <= 0 {
		return nil
	}
	return &SpeakerMemory{max: max(0, maxDevices), ttl: ttl, now: time.Now, devices: make(map[string]*list.Element),
		voices: make([]speakerEntry, max(0, voices))}
}

// Voices returns the profiles of the last voices heard that know their
// speaker's range (and have not expired), for a session whose speaker
// nobody remembers; nil when there are none.
func (m *SpeakerMemory) Voices() []audio.PitchProfile {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audio.PitchProfile
	now := m.now()
	for i := range min(m.nvoices, len(m.voices)) {
		if e := &m.voices[i]; e.pitch.Known() && now.Sub(e.at) <= m.ttl {
			out = append(out, e.pitch)
		}
	}
	return out
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

// Remember stores device's profile, replacing the one before, and keeps
// it among the last voices (rememberVoice); a profile of under 0.4 s of
// voice (not Heard) is ignored, and so is the device part for an empty or
// over-long id.
func (m *SpeakerMemory) Remember(device string, p audio.PitchProfile) {
	if m == nil || !p.Heard() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.rememberVoice(p, now)
	if device == "" || len(device) > MaxDeviceIDBytes || m.max == 0 {
		return
	}
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

// rememberVoice keeps p among the last voices. A profile too short to know
// its speaker's range (a single short question) adds to the most recent
// voice of its register that does not know one yet, so that sessions of
// short questions add up to a range as a device's do; failing that it
// starts a voice of its own. Voices that know no range are never lent.
func (m *SpeakerMemory) rememberVoice(p audio.PitchProfile, now time.Time) {
	n := len(m.voices)
	if n == 0 {
		return
	}
	if !p.Known() {
		for k := 1; k <= min(m.nvoices, n); k++ {
			e := &m.voices[(m.nvoices-k)%n]
			if !e.pitch.Known() && now.Sub(e.at) <= m.ttl && e.pitch.SameRegister(p) {
				e.pitch.Add(p)
				e.at = now
				return
			}
		}
	}
	m.voices[m.nvoices%n] = speakerEntry{pitch: p, at: now}
	m.nvoices++
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
