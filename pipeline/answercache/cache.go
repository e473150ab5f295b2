// Package answercache keeps answers to questions that mean the same, so a
// voice assistant can say them again without its LLM, and with their audio
// kept, without its TTS.
//
// A question's meaning is lexical (Parse): its question word, its content
// words exactly, and a similarity over hedges. Classify says which questions
// are safe to answer from a cache at all: not those that refer to the
// conversation, the time, the person or ask for an action. Entries live
// for a TTL with jitter, within a bound on their count and on their audio
// bytes (least recently used go first), in a Scope (model, system prompt,
// voice, language, knowledge base version); a new knowledge version
// flushes every entry.
//
// # Concurrency
//
// A Cache is safe for concurrent use; one mutex guards it, held for a map
// lookup and a few comparisons. Entries are immutable once stored: a
// caller must copy any audio it hands on with ownership (Piece.Audio).
package answercache

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/tts"
)

// Bypass reasons: why a question was not looked up (Classify).
const (
	ReasonContext  = "context"  // refers to the conversation so far (it, that, again, what about)
	ReasonTime     = "time"     // the answer changes with time (now, today, weather)
	ReasonPersonal = "personal" // depends on who asks (my, me, am i)
	ReasonAction   = "action"   // asks the assistant to act (set, play, remind)
	ReasonVague    = "vague"    // no content word to match on
)

// Reasons lists every bypass reason (for metrics labels).
var Reasons = []string{ReasonContext, ReasonTime, ReasonPersonal, ReasonAction, ReasonVague}

// Classify returns why question m must not be answered from a cache, or ""
// when it may; priorTurns is how many questions the conversation had
// before it (a word like "it" refers to them only when there are some).
func Classify(m Meaning, priorTurns int) string {
	switch {
	case m.Flags.Personal:
		return ReasonPersonal
	case m.Flags.Action:
		return ReasonAction
	case m.Flags.Time:
		return ReasonTime
	case m.Flags.Deictic && priorTurns > 0:
		return ReasonContext
	case len(m.Heavy) == 0:
		return ReasonVague
	}
	return ""
}

// Scope is the deployment an answer belongs to: an answer is served only
// to a question asked in the same scope.
type Scope struct {
	Model, SystemPrompt, Voice, Language string
	// Tools names the tools the question's turn could call (a device with
	// its own tools answers differently).
	Tools string
	// Knowledge is the knowledge base's version ("" without one, or while it
	// is not ready). A lookup under a version other than the entries' flushes
	// them; a store under another version than the entries' is dropped (its
	// question was looked up before the version changed).
	Knowledge string
}

// ID is the scope as a short string (a hash of its fields).
func (s Scope) ID() string {
	h := sha256.New()
	for _, f := range []string{s.Model, s.SystemPrompt, s.Voice, s.Language, s.Tools, s.Knowledge} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Piece is one chunk of an answer as the TTS spoke it: the text handed to
// the synthesizer and the audio it made, at the synthesizer's rate.
type Piece struct {
	Text  string
	Audio []tts.Chunk
}

// Entry is a cached answer. It is immutable once stored.
type Entry struct {
	Question string // the words it was first asked in
	Answer   string // the answer's whole text
	// Pieces are the answer's TTS chunks with their audio; nil when the
	// audio was not kept (over the entry bound): the text is then spoken
	// again.
	Pieces []Piece

	meaning    Meaning
	scope      string
	expires    time.Time
	audioBytes int64
	elem       *list.Element
}

// AudioBytes is the size of the entry's audio.
func (e *Entry) AudioBytes() int64 { return e.audioBytes }

// Config bounds a Cache.
type Config struct {
	// TTL is how long an entry is served; each entry's is shortened by up
	// to Jitter (a fraction, 0 to 1) at random, so entries stored together
	// (a warm-up) do not expire together. 0: no expiry.
	TTL    time.Duration
	Jitter float64
	// MaxEntries and MaxAudioBytes bound the cache (0: no bound on that);
	// the least recently used entries are evicted first. An answer whose
	// audio is over a quarter of MaxAudioBytes is kept without its audio.
	MaxEntries    int
	MaxAudioBytes int64
	// Threshold is the Similarity a question needs with an entry's to be
	// served it; 0 means DefaultThreshold.
	Threshold float64
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// DefaultThreshold is Config.Threshold's default: one hedge word more or
// less passes, two do not (lightWeight).
const DefaultThreshold = 0.75

// Stats are a Cache's counts since it was made.
type Stats struct {
	Hits, Misses, Stores, Evictions, Expired, Flushes int64
	Entries                                           int
	AudioBytes                                        int64
}

// Cache holds answers by meaning.
type Cache struct {
	cfg Config

	mu         sync.Mutex          // guards the fields below
	byKey      map[string][]*Entry // scope ID + meaning key → entries
	lru        *list.List          // of *Entry, most recently used first
	audioBytes int64               // of every entry
	knowledge  string              // the knowledge version of the entries
	stats      Stats               // counts (Entries, AudioBytes filled by Stats)
	rand       func() float64      // jitter draws
	now        func() time.Time    // Config.Now or time.Now
}

// New makes a cache bounded by cfg.
func New(cfg Config) *Cache {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultThreshold
	}
	cfg.Jitter = min(max(cfg.Jitter, 0), 1)
	c := &Cache{cfg: cfg, byKey: map[string][]*Entry{}, lru: list.New(), rand: rand.Float64, now: cfg.Now}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

func mapKey(scope string, m Meaning) string { return scope + "|" + m.Key() }

// flushLocked empties the cache when knowledge is not the version its
// entries were stored under. c.mu must be held.
func (c *Cache) flushLocked(knowledge string) {
	if knowledge == c.knowledge {
		return
	}
	c.knowledge = knowledge
	if c.lru.Len() == 0 {
		return
	}
	c.byKey = map[string][]*Entry{}
	c.lru.Init()
	c.audioBytes = 0
	c.stats.Flushes++
}

// Lookup returns the entry that answers m in scope, or nil. A hit counts as
// a use (it moves the entry to the front of the eviction order).
func (c *Cache) Lookup(scope Scope, m Meaning) *Entry {
	id := scope.ID()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(scope.Knowledge)
	key := mapKey(id, m)
	var best *Entry
	bestSim := 0.0
	now := c.now()
	entries := c.byKey[key]
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if !e.expires.IsZero() && !now.Before(e.expires) {
			c.removeLocked(e)
			c.stats.Expired++
			entries = c.byKey[key]
			i--
			continue
		}
		if s := Similarity(m, e.meaning); s >= c.cfg.Threshold && s > bestSim {
			best, bestSim = e, s
		}
	}
	if best == nil {
		c.stats.Misses++
		return nil
	}
	c.stats.Hits++
	c.lru.MoveToFront(best.elem)
	return best
}

// Store keeps answer (and its pieces' audio, nil for none) for question m
// in scope, replacing an entry of the same meaning. It reports whether the
// answer was kept (not when it is empty).
func (c *Cache) Store(scope Scope, m Meaning, question, answer string, pieces []Piece) bool {
	if strings.TrimSpace(answer) == "" || len(m.Heavy) == 0 {
		return false
	}
	var audio int64
	for _, p := range pieces {
		for _, ch := range p.Audio {
			audio += int64(2 * len(ch.PCM))
		}
	}
	if c.cfg.MaxAudioBytes > 0 && audio > c.cfg.MaxAudioBytes/4 {
		pieces, audio = nil, 0
	}
	id := scope.ID()
	e := &Entry{Question: question, Answer: answer, Pieces: pieces, meaning: m, scope: id, audioBytes: audio}
	c.mu.Lock()
	defer c.mu.Unlock()
	if scope.Knowledge != c.knowledge {
		if c.lru.Len() > 0 {
			// Asked under another version than the cache holds now: a
			// lookup saw a newer one since (or this store is the newer and
			// the next lookup flushes). Either way this answer is not kept.
			return false
		}
		c.knowledge = scope.Knowledge
	}
	if c.cfg.TTL > 0 {
		ttl := time.Duration(float64(c.cfg.TTL) * (1 - c.cfg.Jitter*c.rand()))
		e.expires = c.now().Add(ttl)
	}
	key := mapKey(id, m)
	for _, old := range c.byKey[key] {
		if Similarity(m, old.meaning) == 1 {
			c.removeLocked(old)
			break
		}
	}
	e.elem = c.lru.PushFront(e)
	c.byKey[key] = append(c.byKey[key], e)
	c.audioBytes += audio
	c.stats.Stores++
	for c.lru.Len() > 1 && ((c.cfg.MaxEntries > 0 && c.lru.Len() > c.cfg.MaxEntries) ||
		(c.cfg.MaxAudioBytes > 0 && c.audioBytes > c.cfg.MaxAudioBytes)) {
		oldest, _ := c.lru.Back().Value.(*Entry)
		c.removeLocked(oldest)
		c.stats.Evictions++
	}
	return true
}

// removeLocked takes e out of the cache. c.mu must be held.
func (c *Cache) removeLocked(e *Entry) {
	key := mapKey(e.scope, e.meaning)
	list := c.byKey[key]
	for i, x := range list {
		if x == e {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.byKey, key)
	} else {
		c.byKey[key] = list
	}
	c.lru.Remove(e.elem)
	c.audioBytes -= e.audioBytes
}

// MaxEntryAudioBytes is the most audio one answer keeps (a quarter of
// Config.MaxAudioBytes); 0: no bound.
func (c *Cache) MaxEntryAudioBytes() int64 { return c.cfg.MaxAudioBytes / 4 }

// Flush removes every entry.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey = map[string][]*Entry{}
	c.lru.Init()
	c.audioBytes = 0
	c.stats.Flushes++
}

// Stats returns the cache's counts.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.AudioBytes = c.lru.Len(), c.audioBytes
	return s
}
