// Package questions holds the spoken questions that latency benchmarks and
// tests ask: written for them, one complete turn each.
package questions

// Complete are everyday questions and requests, each a whole turn: bench
// turns speaks them all in every voice, and the browser test asks the
// first six in order.
var Complete = []string{
	"What is the capital of France?",
	"How far away is the moon?",
	"Can you tell me a joke?",
	"What time does the sun set today?",
	"Set a timer for ten minutes.",
	"What does the word ephemeral mean?",
	"How do I boil an egg?",
	"Who wrote the play Hamlet?",
	"What is a compiler?",
	"Turn off the lights in the kitchen.",
	"What is the weather like in London?",
	"How many legs does a spider have?",
	"Remind me to call my sister tomorrow.",
	"Why is the sky blue?",
	"What is the difference between a frog and a toad?",
}
