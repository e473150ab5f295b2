package answercache

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Meaning is what a question asks, reduced to the parts that decide its
// answer. Two questions mean the same when their Intent and Heavy words are
// equal and their Light words are similar enough (Similarity).
//
// The reduction is lexical and written for spoken English as a recogniser
// writes it (lower case, no punctuation; written forms work too): it
// expands contractions, drops what people wrap a question in ("can you
// tell me", "please", "um"), stop words and auxiliaries, turns possessives
// around ("france's capital" has the words of "capital of france"), maps a
// few measure words onto one name ("how tall", "height"), and keeps every
// other word as it was said, so names and numbers ("spain", "ten") must
// match exactly: there is no embedding to say that "spain" is near
// "france".
type Meaning struct {
	// Intent is the kind of answer asked for: what, who, where, when, why,
	// how, or yn (a yes/no question).
	Intent string
	// Heavy are the content words, stemmed, sorted and without repeats;
	// they must all match.
	Heavy []string
	// Order is the heavy words in the order they were said, when order
	// changes the answer: the numbers of a question with numbers ("ten
	// divided by two"), all of them when it compares or relates
	// ("is a dog bigger than a cat"). It is part of the key.
	Order []string
	// Light are hedges and intensifiers ("exactly", "funny", "short"):
	// they may differ a little (Similarity).
	Light []string
	// Flags are what makes the question unsafe to answer from a cache
	// (Classify reads them).
	Flags Flags
}

// Flags mark words that make an answer depend on more than the question.
type Flags struct {
	Deictic  bool // it, that, he, again, more: may refer to the conversation
	Time     bool // now, today, weather, news: the answer changes with time
	Personal bool // my, me, am i: the answer depends on who asks
	Action   bool // set, turn, play, remind: a request to act, not a question
}

// Key is the exact part of the meaning: questions with different keys never
// share an answer.
func (m Meaning) Key() string {
	k := m.Intent + ":" + strings.Join(m.Heavy, " ")
	if len(m.Order) > 0 {
		k += "|" + strings.Join(m.Order, " ")
	}
	return k
}

// lightWeight is a light word's weight in Similarity, against 1 for every
// heavy word: one light word more or less among a heavy word or two still
// passes DefaultThreshold, two do not.
const lightWeight = 0.25

// Similarity is the weighted Jaccard similarity of a and b's words (heavy
// words weigh 1, light ones lightWeight), 0 when their keys differ.
func Similarity(a, b Meaning) float64 {
	if a.Intent != b.Intent || !slices.Equal(a.Heavy, b.Heavy) || !slices.Equal(a.Order, b.Order) {
		return 0
	}
	heavy := float64(len(a.Heavy))
	common := 0
	for _, w := range a.Light {
		if _, ok := slices.BinarySearch(b.Light, w); ok {
			common++
		}
	}
	union := heavy + lightWeight*float64(len(a.Light)+len(b.Light)-common)
	if union == 0 {
		return 1
	}
	return (heavy + lightWeight*float64(common)) / union
}

// Parse reduces a question to its meaning.
func Parse(question string) Meaning {
	words := tokens(question)
	var m Meaning
	words = flagPhrases(words, &m.Flags)
	words = rewritePhrases(stripWrappers(rewritePhrases(words)))
	m.Intent, words = intent(words)
	heavy := make([]string, 0, len(words))
	ordered := orderSensitive(words)
	for i, w := range words {
		if flagWord(w, &m.Flags) {
			continue
		}
		if stopWords[w] {
			continue
		}
		if auxiliaries[w] && i < len(words)-1 {
			continue // "what do you do": the first do is grammar, the last the question
		}
		w = stem(w)
		if c, ok := synonyms[w]; ok {
			w = c
		}
		if lightWords[w] {
			m.Light = append(m.Light, w)
			continue
		}
		heavy = append(heavy, w)
		if ordered || numberWords[w] || isDigits(w) {
			m.Order = append(m.Order, w)
		}
	}
	slices.Sort(heavy) // repeats stay: "two plus two" is not "two plus"
	m.Heavy = heavy
	slices.Sort(m.Light)
	m.Light = slices.Compact(m.Light)
	return m
}

// orderWords relate the things a question names, so that swapping them
// changes the answer.
var orderWords = set("than", "minus", "divided", "over", "before", "after", "versus", "vs", "eat",
	"eats", "ate", "kill", "kills", "killed", "beat", "beats", "chase", "chases", "bigger",
	"smaller", "older", "younger", "faster", "slower", "taller", "shorter", "heavier", "lighter",
	"more", "less", "better", "worse", "power", "root")

func orderSensitive(words []string) bool {
	for _, w := range words {
		if orderWords[w] {
			return true
		}
	}
	return false
}

var numberWords = set("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
	"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
	"eighteen", "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
	"ninety", "hundred", "thousand", "million", "billion", "half", "quarter", "third")

// digitWords say digits as a recogniser writes them.
var digitWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
	"nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
	"eighteen", "nineteen", "twenty"}

// symbols are written operators, as said.
var symbols = strings.NewReplacer("’", "'", "‘", "'", "+", " plus ", "×", " times ", "*", " times ",
	"÷", " divided by ", "=", " ", "%", " percent ")

// tokens lower-cases s, expands contractions and possessives, and splits
// it into words of letters and digits.
func tokens(s string) []string {
	s = strings.ToLower(s)
	s = symbols.Replace(s)
	raw := strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
	out := make([]string, 0, len(raw)+4)
	for _, w := range raw {
		w = strings.Trim(w, "'")
		if w == "" {
			continue
		}
		if isDigits(w) {
			if n, err := strconv.Atoi(w); err == nil && n < len(digitWords) {
				w = digitWords[n]
			}
			out = append(out, w)
			continue
		}
		if full, ok := contractions[w]; ok {
			out = append(out, strings.Fields(full)...)
			continue
		}
		if i := strings.IndexByte(w, '\''); i > 0 {
			stemPart, tail := w[:i], w[i+1:]
			switch tail {
			case "s": // a possessive: "france's capital" → france capital
				out = append(out, stemPart)
			case "re":
				out = append(out, stemPart, "are")
			case "ve":
				out = append(out, stemPart, "have")
			case "ll":
				out = append(out, stemPart, "will")
			case "d":
				out = append(out, stemPart, "would")
			case "m":
				out = append(out, stemPart, "am")
			case "t":
				out = append(out, strings.TrimSuffix(stemPart, "n"), "not")
			default:
				out = append(out, stemPart+tail)
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

func isDigits(w string) bool {
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return w != ""
}

var contractions = map[string]string{
	"what's": "what is", "who's": "who is", "where's": "where is", "when's": "when is",
	"how's": "how is", "why's": "why is", "that's": "that is", "it's": "it is",
	"there's": "there is", "here's": "here is", "he's": "he is", "she's": "she is",
	"let's": "let us", "can't": "can not", "won't": "will not", "cannot": "can not",
	"ain't": "is not", "whats": "what is", "wheres": "where is", "whos": "who is",
	"hows": "how is", "thats": "that is",
}

// hasPhrase reports whether words contains p (words separated by spaces)
// as consecutive words.
func hasPhrase(words []string, p []string) bool {
	for i := 0; i+len(p) <= len(words); i++ {
		if slices.Equal(words[i:i+len(p)], p) {
			return true
		}
	}
	return false
}

// flagPhrases sets the flags that take more than one word to see and
// returns words unchanged.
func flagPhrases(words []string, f *Flags) []string {
	for _, p := range personalPhrases {
		if hasPhrase(words, p) {
			f.Personal = true
		}
	}
	for _, p := range timePhrases {
		if hasPhrase(words, p) {
			f.Time = true
		}
	}
	for _, p := range deicticPhrases {
		if hasPhrase(words, p) {
			f.Deictic = true
		}
	}
	return words
}

func phrases(ss ...string) [][]string {
	out := make([][]string, len(ss))
	for i, s := range ss {
		out[i] = strings.Fields(s)
	}
	return out
}

var (
	personalPhrases = phrases("am i", "i am", "i was", "i have", "i had", "did i", "i said", "i told",
		"i asked", "i live", "i like", "i feel", "i should", "should i", "do i have", "will i")
	timePhrases = phrases("what time", "what day", "what date", "right now", "this week",
		"this weekend", "this month", "this year", "next week", "last night", "at the moment",
		"how long until", "how many days")
	deicticPhrases = phrases("what about", "how about", "and what", "the other", "the same",
		"the first one", "the last one", "the second", "you said", "you just")
)

// flagWord sets the flag a single word raises and reports whether the word
// is one of those (it is then no content word: "me" is never the subject).
func flagWord(w string, f *Flags) bool {
	switch {
	case deicticWords[w]:
		f.Deictic = true
		return true
	case personalWords[w]:
		f.Personal = true
		return true
	case timeWords[w]:
		f.Time = true
		return false // "weather" still names the question
	case actionWords[w]:
		f.Action = true
		return false
	}
	return false
}

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

var (
	deicticWords = set("it", "its", "itself", "that", "this", "these", "those", "he", "she", "him",
		"her", "hers", "his", "they", "them", "their", "theirs", "there", "again", "more", "else",
		"another", "also", "too", "instead", "then", "previous", "earlier", "above", "one", "ones",
		"same", "why")
	personalWords = set("my", "mine", "myself", "me", "our", "ours", "ourselves", "us", "we")
	timeWords     = set("now", "today", "tonight", "tomorrow", "yesterday", "currently", "current",
		"latest", "recent", "recently", "weather", "forecast", "news", "score", "scores", "time",
		"date", "clock", "oclock", "raining", "snowing", "sunny", "outside", "traffic", "open",
		"price", "stock", "stocks", "monday", "tuesday", "wednesday", "thursday", "friday",
		"saturday", "sunday", "weekend", "tonights", "todays", "alarm", "timer", "timers")
	actionWords = set("set", "turn", "play", "pause", "resume", "stop", "remind", "cancel", "text",
		"send", "volume", "louder", "quieter", "mute", "unmute", "skip", "lights", "switch", "add",
		"remove", "delete", "buy", "book", "schedule", "remember", "forget", "shut", "increase",
		"decrease", "dim", "brighten")
)

// wrappers are what people put around a question; they are dropped from
// its start (repeatedly: "um so can you please tell me").
var wrappers = phrases(
	"hey", "hi", "hello", "ok", "okay", "so", "well", "um", "uh", "er", "erm", "hmm", "oh",
	"please", "excuse me", "sorry", "quick question", "question", "assistant", "computer",
	"can you", "could you", "would you", "will you", "can you please", "could you please",
	"would you please", "do you know", "do you happen to know", "i want to know", "i wanna know",
	"i would like to know", "i'd like to know", "i wonder", "i was wondering", "i am wondering",
	"i need to know", "tell me", "give me", "let me know", "show me", "explain", "describe",
	"i want", "i would like", "i need", "just", "actually", "any idea", "any idea of",
	"say", "please tell me", "let us hear", "share",
)

// stripWrappers drops wrappers from the start of words and thanks from
// its end.
func stripWrappers(words []string) []string {
	for again := true; again; {
		again = false
		for _, p := range wrappers {
			if len(words) > len(p) && slices.Equal(words[:len(p)], p) {
				words = words[len(p):]
				again = true
			}
		}
	}
	for {
		n := len(words)
		switch {
		case n > 1 && (words[n-1] == "please" || words[n-1] == "thanks"):
			words = words[:n-1]
		case n > 2 && words[n-2] == "thank" && words[n-1] == "you",
			n > 2 && words[n-2] == "to" && words[n-1] == "me", // "explain it to me"
			n > 2 && words[n-2] == "for" && words[n-1] == "me":
			words = words[:n-2]
		default:
			return words
		}
	}
}

// phraseRewrites name one thing one way: each from-phrase is replaced by
// its to-phrase.
var phraseRewrites = []struct{ from, to []string }{
	{strings.Fields("hi there"), strings.Fields("hello")},
	{strings.Fields("hello there"), strings.Fields("hello")},
	{strings.Fields("how do you"), strings.Fields("how do i")},
	{strings.Fields("how does one"), strings.Fields("how do i")},
	{strings.Fields("how to"), strings.Fields("how do i")},
	{strings.Fields("from earth"), nil},
	{strings.Fields("from the earth"), nil},
	{strings.Fields("capital city"), strings.Fields("capital")},
	{strings.Fields("how many people live in"), strings.Fields("what is the population of")},
	{strings.Fields("how many people are in"), strings.Fields("what is the population of")},
	{strings.Fields("how many people does"), strings.Fields("what is the population of")},
	{strings.Fields("what is the definition of"), strings.Fields("what does mean")},
	{strings.Fields("what is the meaning of"), strings.Fields("what does mean")},
	{strings.Fields("what is the meaning of the word"), strings.Fields("what does mean")},
	{strings.Fields("define"), strings.Fields("what does mean")},
	{strings.Fields("meaning of"), strings.Fields("mean")},
	{strings.Fields("definition of"), strings.Fields("mean")},
	{strings.Fields("what does the word"), strings.Fields("what does")},
	{strings.Fields("the word"), nil},
	{strings.Fields("the play"), nil},
	{strings.Fields("the book"), nil},
	{strings.Fields("the novel"), nil},
	{strings.Fields("the song"), nil},
	{strings.Fields("the name of"), nil},
	{strings.Fields("a joke"), strings.Fields("joke")},
	{strings.Fields("something funny"), strings.Fields("joke")},
	{strings.Fields("make me laugh"), strings.Fields("joke")},
	{strings.Fields("far away"), strings.Fields("far")},
	{strings.Fields("how come"), strings.Fields("why")},
	{strings.Fields("what is the reason"), strings.Fields("why")},
	{strings.Fields("what are you able to do"), strings.Fields("what can you do")},
	{strings.Fields("what are you capable of"), strings.Fields("what can you do")},
	{strings.Fields("what can you help with"), strings.Fields("what can you do")},
	{strings.Fields("what things can you do"), strings.Fields("what can you do")},
	{strings.Fields("what do you do"), strings.Fields("what can you do")},
	{strings.Fields("how are you doing"), strings.Fields("how are you")},
	{strings.Fields("how is it going"), strings.Fields("how are you")},
}

func rewritePhrases(words []string) []string {
	for _, r := range phraseRewrites {
		for i := 0; i+len(r.from) <= len(words); i++ {
			if slices.Equal(words[i:i+len(r.from)], r.from) {
				words = slices.Concat(words[:i], r.to, words[i+len(r.from):])
				i += len(r.to) - 1
			}
		}
	}
	return words
}

var wh = set("what", "which", "who", "whom", "whose", "where", "when", "why", "how")

// measures are the adjectives "how" asks about, each as the noun a
// "what is the ..." question would use.
var measures = map[string]string{
	"tall": "height", "high": "height", "big": "size", "large": "size", "old": "age",
	"far": "distance", "long": "length", "heavy": "weight", "fast": "speed", "deep": "depth",
	"hot": "temperature", "cold": "temperature", "many": "count", "much": "amount", "wide": "width",
}

// intent takes the question word off words (the first wh word among the
// first three, or a leading auxiliary for a yes/no question); a request
// with neither ("tell me a joke" less its wrapper) asks what.
func intent(words []string) (string, []string) {
	for i := 0; i < len(words) && i < 3; i++ {
		w := words[i]
		if !wh[w] {
			continue
		}
		rest := slices.Concat(words[:i], words[i+1:])
		switch w {
		case "which", "what":
			return "what", rest
		case "whom", "whose":
			return "who", rest
		case "how":
			if i+1 < len(words) {
				if n, ok := measures[words[i+1]]; ok {
					rest[i] = n // "how tall is" asks what the height is
					return "what", rest
				}
			}
		}
		return w, rest
	}
	if len(words) > 1 && auxiliaries[words[0]] {
		return "yn", words[1:]
	}
	return "what", words
}

var auxiliaries = set("is", "are", "was", "were", "am", "be", "do", "does", "did", "can", "could",
	"will", "would", "should", "shall", "may", "might", "must", "has", "have", "had")

var stopWords = set("the", "a", "an", "of", "in", "on", "at", "to", "for", "from", "by", "with",
	"about", "as", "into", "and", "or", "i", "is", "are", "was", "were", "am", "be", "been",
	"being", "does", "did", "can", "could", "would", "should", "shall", "will", "may", "might",
	"must", "some", "any", "please", "thanks", "like", "kind", "sort", "type", "called",
	"named", "exactly", "really", "actually", "basically", "just", "very", "so", "um", "uh",
	"here", "thing", "things", "doing", "know", "tell")

// "you" and "do" are not stop words: "who are you" and "what can you do"
// are about the assistant, and the second do of "what do you do" is the
// question (the first, an auxiliary, is dropped).

// lightWords may differ between paraphrases (Similarity).
var lightWords = set("funny", "good", "nice", "short", "quick", "little", "bit", "simple", "brief",
	"briefly", "quickly", "roughly", "approximately", "exact", "precise", "precisely", "best",
	"great", "random", "new", "cool", "fun", "interesting", "travel", "move", "go", "away")

// synonyms name a word the way a paraphrase usually does.
var synonyms = map[string]string{
	"height": "height", "altitude": "height", "size": "size", "age": "age",
	"distance": "distance", "length": "length", "weight": "weight", "speed": "speed",
	"depth": "depth", "number": "count", "amount": "amount", "width": "width",
	"author": "write", "writer": "write", "wrote": "write", "written": "write", "writ": "write",
	"inventor": "invent", "invented": "invent", "discoverer": "discover", "discovered": "discover",
	"painter": "paint", "painted": "paint", "composer": "compose", "composed": "compose",
	"founder": "found", "founded": "found", "meaning": "mean", "definition": "mean",
	"means": "mean", "jok": "joke", "gag": "joke", "populat": "population",
	"had": "have", "ha": "have", "has": "have", "cook": "cook", "cooking": "cook", "boiling": "boil",
	// British spellings (the recogniser's dictionary has both).
	"colour": "color", "favourite": "favorite", "harbour": "harbor", "honour": "honor",
	"neighbour": "neighbor", "flavour": "flavor", "labour": "labor", "humour": "humor",
	"behaviour": "behavior", "rumour": "rumor", "centre": "center", "metre": "meter",
	"theatre": "theater", "litre": "liter", "grey": "gray", "aeroplane": "airplane",
	"organisation": "organization", "realise": "realize", "analyse": "analyze",
	"hi": "hello", "hey": "hello", "greeting": "hello", "your": "you", "yourself": "you",
	"yours": "you", "biggest": "largest", "tallest": "highest",
}

// stem strips a plural s (and a possessive left by the recogniser); words
// of three letters or fewer, and those ending in ss, us or is, are kept.
func stem(w string) string {
	n := len(w)
	switch {
	case n <= 3:
		return w
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"),
		strings.HasSuffix(w, "shes"):
		return w[:n-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"),
		strings.HasSuffix(w, "ous"):
		return w
	case strings.HasSuffix(w, "s"):
		return w[:n-1]
	}
	return w
}
