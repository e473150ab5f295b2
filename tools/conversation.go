package tools

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Notice is something a tool says to the person after its call returned: a
// timer going off.
type Notice struct {
	Text string
	From string // the tool's name, for logs and events
	At   time.Time
}

// maxPendingNotices bounds what a conversation holds while no session is
// attached; a device gone for long cannot pile them up.
const maxPendingNotices = 8

// Conversation is a voice conversation as tools see it. It outlives one
// connection: a /ws session resumed after a drop and a xiaozhi speaker that
// reconnects get the same Conversation back (Conversations), so a timer
// set before the drop is heard after it.
type Conversation struct {
	key string
	loc *time.Location
	log zerolog.Logger

	mu      sync.Mutex
	deliver func(Notice) bool // the attached session's; nil while none is
	attach  int               // counts attachments, so a stale detach is a no-op
	pending []Notice
	ended   bool
	values  map[any]any
	onEnd   []func()
	idle    *time.Timer // ends the conversation after its hold without a session
	hold    time.Duration
	owner   *Conversations
}

// NewConversation returns a conversation of its own (not in a registry):
// it ends only when End is called.
func NewConversation(key string, loc *time.Location, log zerolog.Logger) *Conversation {
	if loc == nil {
		loc = time.Local
	}
	return &Conversation{key: key, loc: loc, log: log.With().Str("conversation", key).Logger()}
}

// Key names the conversation (stable across reconnections).
func (c *Conversation) Key() string { return c.key }

// Location is the time zone the person is taken to be in.
func (c *Conversation) Location() *time.Location { return c.loc }

// Value returns the conversation's value for key, made by init on first
// use: a tool keeps its per-conversation state there (a timer its timers).
// init runs without the conversation's lock held (it may call OnEnd); if
// two calls race, one value wins and both get it.
func (c *Conversation) Value(key any, init func() any) any {
	c.mu.Lock()
	v, ok := c.values[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = init()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.values[key]; ok {
		return old
	}
	if c.values == nil {
		c.values = map[any]any{}
	}
	c.values[key] = v
	return v
}

// OnEnd registers fn to run once when the conversation ends (a tool stops
// its timers); on an ended conversation it runs at once.
func (c *Conversation) OnEnd(fn func()) {
	c.mu.Lock()
	if !c.ended {
		c.onEnd = append(c.onEnd, fn)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	fn()
}

// Announce gives n to the attached session, or holds it until one attaches.
// It reports whether the notice was kept (delivered or held); a notice for
// an ended conversation, or past the hold's bound, is dropped with a log
// line.
func (c *Conversation) Announce(n Notice) bool {
	if n.At.IsZero() {
		n.At = time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.ended:
		c.log.Info().Str("tool", n.From).Str("text", n.Text).Msg("notice dropped: the conversation has ended")
		return false
	case c.deliver != nil && c.deliver(n):
		return true
	case len(c.pending) >= maxPendingNotices:
		c.log.Warn().Str("tool", n.From).Str("text", n.Text).Msg("notice dropped: too many held for a conversation with no session")
		return false
	}
	c.pending = append(c.pending, n)
	c.log.Info().Str("tool", n.From).Msg("notice held until the device reconnects")
	return true
}

// Attach makes deliver the conversation's way to the person and hands it
// what was held. deliver must not block; it returns false when it cannot
// take a notice now (the notice is then held). The returned detach undoes
// this attachment only.
func (c *Conversation) Attach(deliver func(Notice) bool) (detach func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attach++
	id := c.attach
	c.deliver = deliver
	if c.idle != nil {
		c.idle.Stop()
	}
	kept := c.pending[:0]
	for _, n := range c.pending {
		if !deliver(n) {
			kept = append(kept, n)
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.attach != id || c.ended {
			return
		}
		c.deliver = nil
		if c.owner != nil {
			c.idle = time.AfterFunc(c.hold, c.expire)
		}
	}
}

// expire ends a registry's conversation that stayed without a session for
// its hold.
func (c *Conversation) expire() {
	c.mu.Lock()
	stale := c.deliver != nil || c.ended
	c.mu.Unlock()
	if !stale {
		c.End()
	}
}

// End ends the conversation: held notices are dropped (logged), OnEnd
// functions run, and a registry forgets it. It is idempotent.
func (c *Conversation) End() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	c.deliver = nil
	if c.idle != nil {
		c.idle.Stop()
	}
	for _, n := range c.pending {
		c.log.Info().Str("tool", n.From).Str("text", n.Text).Msg("notice dropped: the device did not come back")
	}
	c.pending = nil
	fns := c.onEnd
	c.onEnd = nil
	owner := c.owner
	c.mu.Unlock()
	if owner != nil {
		owner.forget(c)
	}
	for _, fn := range fns {
		fn()
	}
}

// Conversations finds a conversation again by key when its device comes
// back. A conversation no session has held for Hold ends.
type Conversations struct {
	hold time.Duration
	loc  *time.Location
	log  zerolog.Logger

	mu    sync.Mutex
	byKey map[string]*Conversation
}

// NewConversations returns an empty registry; hold ≤ 0 means 10 minutes.
func NewConversations(hold time.Duration, loc *time.Location, log zerolog.Logger) *Conversations {
	if hold <= 0 {
		hold = 10 * time.Minute
	}
	return &Conversations{hold: hold, loc: loc, log: log, byKey: map[string]*Conversation{}}
}

// Open returns the live conversation of key, or a new one.
func (r *Conversations) Open(key string) *Conversation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.byKey[key]; c != nil {
		return c
	}
	c := NewConversation(key, r.loc, r.log)
	c.owner, c.hold = r, r.hold
	r.byKey[key] = c
	return c
}

// Len is how many conversations are live.
func (r *Conversations) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}

// Close ends every conversation.
func (r *Conversations) Close() {
	r.mu.Lock()
	all := make([]*Conversation, 0, len(r.byKey))
	for _, c := range r.byKey {
		all = append(all, c)
	}
	r.mu.Unlock()
	for _, c := range all {
		c.End()
	}
}

func (r *Conversations) forget(c *Conversation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey[c.key] == c {
		delete(r.byKey, c.key)
	}
}
