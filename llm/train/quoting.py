"""Dialogues that teach the demo assistant to repeat and quote (voxpipe's own text and templates).

A voice assistant is asked to say things back: "repeat after me", "say that again", "what did I
just say", "how do you spell", "read my list back". The answers copy text from earlier in the
conversation verbatim, which is also what lets prompt-lookup speculative decoding draft them.

The sentences quoted come from the training side of the corpus (answers and usage examples), plus
some shuffled word strings so the model learns to copy rather than to recall. Sentences are split
between training and validation, and none mentions a held-out headword. The bench's own quoting
prompts (cmd/voxpipe/llm.go, benchQuotes) are never used.
"""
import re

# The four sentences of `voxpipe llm bench --lookup`: kept out of the training data.
BENCH_QUOTES = [
    "the quick brown fox jumps over the lazy dog near the quiet river bank.",
    "a compiler translates source code into machine code that a computer can run.",
    "please remind me to buy milk, eggs and bread on the way home tonight.",
    "the meeting with the design team has moved to Thursday at three in the afternoon.",
]

# Phrasings whose answer is the sentence alone, and phrasings where "Sure." may come first.
REPEAT_EXACT = ["Repeat after me: {s}", "Say after me: {s}", "Please say: {s}", "Say this: {s}",
                "Repeat this: {s}", "Say exactly this: {s}"]
REPEAT_POLITE = ["Can you repeat this: {s}", "Could you say this back to me: {s}", "Please repeat: {s}",
                 "Can you say this for me: {s}", "Repeat after me please: {s}"]
AGAIN = ["Say that again.", "Can you repeat that?", "Repeat that, please.", "Could you say that again?",
         "Sorry, what was that?", "One more time, please.", "Say it again.", "Please repeat your answer."]
AGAIN_PREFIX = ["", "", "", "Sure. ", "I said: "]
USER_AGAIN = ["What did I just say?", "What was my question?", "Repeat my question.", "What did I ask you?"]
SPELL = ["How do you spell {w}?", "Spell {w}.", "Can you spell {w} for me?", "How is {w} spelled?"]
LIST_ONE = ["Read this list back to me: {l}", "Repeat this list: {l}", "Say this list back: {l}"]
LIST_TAKE = ["Here is my list: {l}", "Remember this list: {l}", "My list is {l}", "Take a note: {l}"]
LIST_TAKEN = ["Got it.", "Okay, I'll remember that.", "Noted.", "Okay."]
LIST_BACK = ["Read my list back to me.", "What was on my list?", "Read it back, please.", "What's my list?"]
LIST_BACK_PREFIX = ["", "Your list: ", "You said: "]

WORD = re.compile(r"[A-Za-z']+")


def norm(s):
    return " ".join(WORD.findall(s.lower()))


def sentence_pool(answers, heldout):
    """Sentences of 5 to 30 words from the corpus answers, whole answers and single sentences."""
    banned = {norm(q) for q in BENCH_QUOTES}
    seen, pool = set(), []
    for a in answers:
        if a.startswith("Sure: "):
            a = a[len("Sure: "):]
        pieces = [a] + re.split(r"(?<=[.!?])\s+(?=[A-Z])", a)
        for p in pieces:
            words = p.split()
            if not 5 <= len(words) <= 30:
                continue
            key = norm(p)
            if key in seen or key in banned or any(w in heldout for w in key.split()):
                continue
            seen.add(key)
            pool.append(p)
    return pool


def shuffled_words(rng, vocab):
    """A string of unrelated words: only copying, not recall, can repeat it."""
    s = " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 20)))
    return s + rng.choice([".", ".", "", "!"])


def as_spoken(rng, s):
    """The sentence as a user might say it: a lower-case start or no full stop, sometimes."""
    if rng.random() < 0.5:
        s = s[:1].lower() + s[1:]
    if rng.random() < 0.2:
        s = s.rstrip(".")
    return s


def spelled(word):
    return "-".join(c.upper() for c in word)


def a_list(rng, nouns):
    items = rng.sample(nouns, rng.randint(2, 6))
    if rng.random() < 0.5:
        return ", ".join(items[:-1]) + " and " + items[-1] + "."
    return ", ".join(items) + rng.choice([".", ""])


class Quoter:
    """Makes the quoting dialogues; qa_pairs give the ordinary turns that "say that again" follows."""

    def __init__(self, rng, sentences, qa_pairs, nouns, words):
        self.rng, self.sentences, self.qa_pairs, self.nouns, self.words = rng, sentences, qa_pairs, nouns, words

    def sentence(self):
        if self.rng.random() < 0.15:
            return shuffled_words(self.rng, self.words)
        return self.rng.choice(self.sentences)

    def dialogue(self):
        """One dialogue as a list of (question, answer) turns."""
        rng = self.rng
        kind = rng.random()
        if kind < 0.45:  # repeat after me
            s = as_spoken(rng, self.sentence())
            if rng.random() < 0.6:
                turn = (rng.choice(REPEAT_EXACT).format(s=s), s)
            else:
                turn = (rng.choice(REPEAT_POLITE).format(s=s), rng.choice(["", "Sure. "]) + s)
            return [rng.choice(self.qa_pairs), turn] if rng.random() < 0.2 else [turn]
        if kind < 0.67:  # say that again: the previous answer once more
            q, a = rng.choice(self.qa_pairs)
            return [(q, a), (rng.choice(AGAIN), rng.choice(AGAIN_PREFIX) + a)]
        if kind < 0.75:  # what did I just say: the user's own words
            q, a = rng.choice(self.qa_pairs)
            return [(q, a), (rng.choice(USER_AGAIN), "You said: " + q)]
        if kind < 0.87:  # lists
            lst = a_list(rng, self.nouns)
            if rng.random() < 0.5:
                return [(rng.choice(LIST_ONE).format(l=lst), lst)]
            return [(rng.choice(LIST_TAKE).format(l=lst), rng.choice(LIST_TAKEN)),
                    (rng.choice(LIST_BACK), rng.choice(LIST_BACK_PREFIX) + lst)]
        w = rng.choice(self.nouns)  # spelling
        return [(rng.choice(SPELL).format(w=w), "{} is spelled {}.".format(w, spelled(w)))]


def repeat_in_smalltalk(dialogues, again_questions):
    """Mixed small-talk conversations that ask "say that again" after an answer get that answer
    again, not the stand-alone reply ("please ask again"), so the two kinds of data agree. Returns
    a new list (the dialogues may be shared with the validation set, which stays as it was) and
    how many turns changed."""
    out, changed = [], 0
    for d in dialogues:
        msgs = d["messages"]
        fixed = [i for i, m in enumerate(msgs) if m["role"] == "user" and m["content"] in again_questions
                 and i >= 2 and msgs[i - 1]["role"] == "assistant" and i + 1 < len(msgs)]
        if fixed:
            msgs = list(msgs)
            for i in fixed:
                msgs[i + 1] = {"role": "assistant", "content": msgs[i - 1]["content"]}
            d = dict(d, messages=msgs)
            changed += len(fixed)
        out.append(d)
    return out, changed
