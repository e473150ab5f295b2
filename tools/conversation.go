package tools

// Conversation is a voice conversation as tools see it (filled in by
// conversation handling: timers reach the person through it).
type Conversation struct {
	Key string
}
