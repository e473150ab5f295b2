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

// Short are the short everyday turns people say most to an assistant, each
// a whole turn of one to four words. A text end-of-turn model easily reads
// them as the start of something longer ("what time is it" ... "in tokyo"),
// so bench turns reports their heard latency apart from Complete's.
var Short = []string{
	"What time is it?",
	"What can you do?",
	"Thank you.",
	"Stop.",
	"What's the weather like?",
	"Who are you?",
	"How are you?",
	"Tell me a joke.",
	"Play some music.",
	"Good morning.",
}
