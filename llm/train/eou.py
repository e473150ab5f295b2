#!/usr/bin/env python3
"""Train the end-of-utterance scorer (models/voxpipe-eou-q8_0.gguf) used by pipeline/turn.

The turn detector asks one question of a partial transcript: how likely is the end-of-user-message
token <|im_end|> right after it, in "<|im_start|>user\\n{partial}"? A complete utterance should make
it likely, a cut-off one unlikely. The scorer is the demo draft (same tokenizer) fine-tuned for that,
and the shipped one was fine-tuned again from the scorer before it (Makefile EOU_BASE):

  prepare  (standard library only) collects utterances in the form the recogniser produces — lower
           case, no punctuation, digits spelled out — from prepare.py's corpus (the users' questions
           and the first sentences of the answers), WordNet's example sentences, a small grammar of
           everyday requests and short turns written here, question shapes over WordNet's common
           nouns ("how many legs does a ... have"), smalltalk.py, and the sentences of Debian's
           fortunes (the broadest natural English here). A templated request is also kept without
           its trailing complement ("how far is the moon [from here]"), as people leave it out. Each
           keeps a "," marker where the written text had a comma (where people pause) and a "|" where
           a sentence ended inside the turn ("thanks | what's the weather", "set a timer | please"),
           which training drops. Split by text; `voxpipe bench eou`'s set is kept out (--exclude).
  train    (PyTorch) draws utterances by source weight, adds recognition errors (substituted,
           dropped and inserted words), and scores every word boundary in one pass: the last one is
           complete (label 1), every earlier one a cut-off (label 0; a comma boundary counts double,
           it is where a pause fools a silence timer) unless the words so far could be a whole turn:
           a "|" boundary, or a prefix that is itself a complete utterance of the data ("what time is
           it" before "in tokyo"), gets the target --ambiguous and no weight in validation. (Labelling
           those cut-offs taught the scorer before it that everyday requests go on: "what time is
           it" 0.0000, "turn off the lights in the kitchen" 0.003.) The loss is the binary cross-entropy of
           P(<|im_end|>) there plus a little next-token loss, so the model stays a language model.
           The checkpoint with the best validation AUC on noisy text is exported as GGUF F16, for
           `voxpipe llm quantize`; report.json holds AUC (clean, noisy, commas), the scorer before
           training, and a ROC table.

  speech   The recogniser's own text: `eou.py speech-texts` picks utterances of the data (users' turns mostly),
           `voxpipe bench eou-speech` speaks each (flite and espeak-ng voices, room noise), pauses it once after a
           random word and streams it through pocketsphinx as a session does; its partial and final at the pause
           are cut-offs, at the end complete. `train --speech` draws them as one more source, without made-up
           errors: they carry the recogniser's own ("what is the" heard as "what is that"), which random word
           substitutions do not teach.

make train-eou runs them all and quantizes. Everything is seeded.
"""
import argparse
import gzip
import json
import math
import os
import random
import re
import struct
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WORDNET = "/usr/share/wordnet"
MAX_WORDS = 32

# ------------------------------------------------------------------------------------------ ASR form

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n):
    """English words for 0 <= n < 10**9, the way a recogniser spells numbers (no "and")."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        return ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))
    for size, name in ((10 ** 6, "million"), (1000, "thousand")):
        if n >= size:
            return number_words(n // size) + " " + name + ("" if n % size == 0 else " " + number_words(n % size))
    return ""


def digits(m):
    s = m.group()
    if len(s) > 9:
        return " ".join(ONES[int(c)] for c in s)
    if len(s) == 4 and 1100 <= int(s) <= 2099 and int(s) % 100:  # years: nineteen eighty four
        return number_words(int(s[:2])) + " " + (("oh " + ONES[int(s[3])]) if s[2] == "0" else number_words(int(s[2:])))
    return number_words(int(s))


MARKS = (",", "|")


def asr_form(text):
    """Written text -> recogniser text: lower case, words of [a-z'], digits spelled out, commas kept as ","
    tokens and sentence ends inside the text as "|" (markers only; "|" in the input is one too). None when
    nothing is left or it is too long."""
    s = text.lower().replace("&", " and ").replace("%", " percent ").replace("+", " plus ").replace("@", " at ")
    s = s.replace("\u2019", "'")
    s = re.sub(r"\d+", lambda m: " " + digits(m) + " ", s)
    s = re.sub(r"(?<!\bmr)(?<!\bmrs)(?<!\bms)(?<!\bdr)(?<!\bst)(?<!\bvs)(?<!\bno)[.!?]+(?=\s+[a-z0-9'\"(])", " | ", s)  # a sentence ended and the turn went on
    s = re.sub(r"[,;:]", " , ", s).replace("|", " | ")
    s = re.sub(r"[^a-z',| ]+", " ", s)
    words = []
    for w in s.split():
        w = w.strip("'")
        if w in MARKS and (not words or words[-1] in MARKS):
            if w == "|" and words:
                words[-1] = "|"  # "|" wins over a "," at the same boundary
            continue
        if w:
            words.append(w)
    while words and words[-1] in MARKS:
        words.pop()
    n = sum(1 for w in words if w not in MARKS)
    if n == 0 or n > MAX_WORDS:
        return None
    return " ".join(words)


# ------------------------------------------------------------------------------------------ sources

def first_sentence(text):
    return re.split(r"(?<=[.!?])\s+", text.strip())[0]


def corpus_utterances(data_dir):
    """The users' turns, and the answers' first sentences (things people also say), from prepare.py's output."""
    for name in ("train.jsonl", "valid.jsonl"):
        path = os.path.join(data_dir, name)
        with open(path, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                for m in d["messages"]:
                    if m["role"] == "user":
                        yield "user", m["content"]
                    elif m["role"] == "assistant" and d.get("src") in ("wordnet", "smalltalk"):
                        yield "answer", first_sentence(m["content"])


def wordnet_examples():
    """The quoted example sentences of WordNet's glosses ("he ran into the room")."""
    for name in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(WORDNET, "data." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                gloss = line.partition("|")[2]
                for ex in re.findall(r'"([^"]{8,200})"', gloss):
                    yield "example", ex


PLACES = ["paris", "london", "tokyo", "berlin", "madrid", "rome", "chicago", "boston", "seattle", "denver", "toronto",
          "sydney", "dublin", "lisbon", "new york", "san francisco", "los angeles", "mexico city", "hong kong",
          "the airport", "the station", "the office", "my house", "the beach", "the mountains", "the city centre",
          "the park", "my office", "the coast"]
TIMES = ["tomorrow", "tonight", "today", "this evening", "this weekend", "next week", "on monday", "on friday",
         "in the morning", "after lunch", "later", "right now", "at {n} o'clock", "at {n} thirty", "in {n} minutes",
         "before the meeting", "on saturday night", "this afternoon"]
ACTIONS = ["take an umbrella", "wear a coat", "leave early", "call my mother", "buy some milk", "water the plants",
           "book a table", "pay the electricity bill", "walk the dog", "send the report", "check the oven",
           "make pancakes", "fix a flat tyre", "learn to swim", "boil an egg", "change a light bulb", "tie a tie",
           "bake bread", "reset my password", "get to the museum", "plant tomatoes", "clean a cast iron pan",
           "start running", "write a cover letter", "cook rice", "remove a stain from a shirt", "renew my passport",
           "feed the cat", "pick up the kids", "go to the gym", "cancel my appointment"]
THINGS = ["a rainbow", "the moon", "a volcano", "photosynthesis", "gravity", "the internet", "a black hole",
          "inflation", "a vaccine", "the stock market", "an earthquake", "electricity", "a compiler", "democracy",
          "a hurricane", "the tide", "thunder", "a battery", "a solar panel", "the immune system", "jazz",
          "a credit score", "a mortgage", "the speed of light", "a dinosaur", "the heart", "wifi", "a glacier"]
PEOPLE = ["my sister", "my boss", "the doctor", "my friend sam", "grandma", "the plumber", "my dentist", "anna",
          "the kids", "my brother", "david"]
GENRES = ["jazz", "classical", "rock", "relaxing", "piano", "nineteen eighties", "happy", "country"]
INTROS = ["if it rains {t}", "when i get home", "before i leave", "after the meeting", "so", "okay so", "by the way",
          "actually", "hey voxpipe", "quick question", "i was wondering", "just out of curiosity", "well",
          "if i leave {t}", "when you have a moment", "for my homework", "as soon as possible", "one more thing",
          "sorry", "listen", "on second thought", "and also", "now", "alright", "so basically"]
QUESTIONS = [
    "what's the weather like in {p}", "what will the weather be {t}", "is it going to rain in {p} {t}",
    "will it be sunny {t}", "how cold is it in {p}", "set a timer for {n} minutes", "set an alarm for {n} thirty",
    "remind me to {a} {t}", "how do i {a}", "what's the best way to {a}", "should i {a} {t}",
    "how long does it take to {a}", "can you remind me to {a}", "what is {x}", "how does {x} work",
    "why is {x} important", "explain {x} to me", "tell me something about {x}", "what's the difference between {x} and {y}",
    "how far is {p} from {q}", "how long is the flight from {p} to {q}", "what time is it in {p}",
    "play some {g} music", "play something {g}", "turn up the volume", "turn off the lights in the kitchen",
    "call {o}", "send a message to {o}", "text {o} that i'm running late", "tell {o} i'll be there {t}",
    "what's on my calendar {t}", "do i have any meetings {t}", "add eggs to my shopping list",
    "what's {n} times {m}", "what is {n} plus {m}", "how many days are there until christmas",
    "convert {n} miles to kilometres", "how many grams are in a pound", "who invented {x}",
    "tell me a joke", "tell me a joke about {x}", "what should i cook for dinner {t}",
    "is there a pharmacy near {p}", "find a good restaurant near {p}", "how do you spell {w}",
    "what does the word {w} mean", "can you help me {a}", "i need to {a} {t}", "i want to {a}",
    "could you tell me how {x} works", "do you know where {p} is", "i'd like to know why {x} matters",
    "can you explain what {x} is", "what are the symptoms of a cold", "how much water should i drink a day",
    "where did i park the car", "what year did the first moon landing happen", "who won the game last night",
    "is it safe to {a} {t}", "what's a good name for a puppy", "give me a recipe for {f}", "how do you make {f}",
    "what goes well with {f}", "how many calories are in {f}", "i'm looking for a recipe with {f}",
    "what's the capital of {c}", "how big is {c}", "what language do they speak in {c}",
]
FOODS = ["pasta", "chicken soup", "banana bread", "pancakes", "a salad", "fried rice", "lentils", "an omelette",
         "guacamole", "apple pie", "curry"]
COUNTRIES = ["france", "japan", "brazil", "canada", "kenya", "norway", "australia", "egypt", "peru", "india"]
WORDS = ["necessary", "rhythm", "separate", "definitely", "ephemeral", "lantern", "harbour", "conscientious"]


def grammar_utterances(rng, n):
    def fill(t):
        return t.format(p=rng.choice(PLACES), q=rng.choice(PLACES), t=fill(rng.choice(TIMES)) if "{t}" in t else "",
                        a=rng.choice(ACTIONS), x=rng.choice(THINGS), y=rng.choice(THINGS), o=rng.choice(PEOPLE),
                        g=rng.choice(GENRES), n=rng.randint(2, 12), m=rng.randint(2, 99), w=rng.choice(WORDS),
                        f=rng.choice(FOODS), c=rng.choice(COUNTRIES))
    for _ in range(n):
        q = fill(rng.choice(QUESTIONS))
        r = rng.random()
        if r < 0.25:
            q = fill(rng.choice(INTROS)) + ", " + q
        elif r < 0.35:
            q = q + "|, and " + fill(rng.choice(QUESTIONS))  # "|": it could have ended there
        elif r < 0.42:
            q = q + "|, please"
        elif r < 0.47:
            q = fill(rng.choice(QUESTIONS)) + ". " + q  # two sentences in one turn
        yield "grammar", q


# Everyday turns a voice assistant hears that the request grammar above lacks: short replies and
# commands (a complete turn of one to three words), yes/no questions, statements about oneself, and
# requests that end in a complement. Their cut-offs teach that "turn off the" or "what is the" goes on.
SHORT_TURNS = [
    "yes", "no", "yes please", "no thanks", "no thank you", "okay", "ok thanks", "sure", "maybe later", "not now",
    "stop", "pause", "cancel", "never mind", "go on", "continue", "repeat that", "say that again", "louder",
    "quieter", "next", "skip", "next song", "play", "resume", "thanks", "thank you", "thank you so much", "great",
    "perfect", "awesome", "cool", "that's right", "that's wrong", "exactly", "correct", "hello", "hi there",
    "hey", "good morning", "good night", "goodbye", "bye", "see you", "what", "why", "really", "how come",
    "are you sure", "i don't know", "i don't think so", "of course", "help", "what time is it", "what's the date",
    "call mom", "call dad", "play music", "lights off", "lights on", "volume up", "volume down", "mute",
    "what's up", "how are you", "who are you", "what can you do", "tell me more", "that's all", "i'm done",
    "what day is it", "what's the weather", "turn it off", "turn it up", "turn it down", "play something",
    "play the news", "good afternoon", "good evening", "thanks a lot", "that's great", "no problem", "wait",
    "hold on", "one moment", "go ahead", "i see", "interesting", "why not", "how", "when", "where", "who",
    "what's that", "what is it", "is it", "can you", "will you", "please", "sorry", "excuse me", "i'm fine",
    "not bad", "all good", "what time", "what about tomorrow", "and you", "me too", "oh no", "oh really",
    "tell me a story", "sing a song", "set an alarm", "set a timer", "check the weather", "call my wife",
    "call my husband", "answer the door", "lock the door", "open the door", "close the blinds",
]
# Bare questions and remarks people put to an assistant, each whole as it stands, in both the forms a recogniser
# writes ("what is your name", "what's your name"); `prepare --short-questions` adds them to the short turns. Tried
# and not shipped (models/README.md, "Bare questions"): they lifted bare questions the scorer was not shown
# (internal/bench/testdata/eou-bare.tsv: median 0.37 -> 0.53) and cut the wait after short turns to a third, but
# also raised the scores of misrecognised first halves, and bench turns cut 10 of 192 paused sentences instead of 6.
SHORT_QUESTIONS = [
    "what is your name", "what's your name", "what are you called", "how old are you", "who built you",
    "where are you from", "where do you live", "are you there", "are you awake", "are you real", "are you human",
    "what are you doing", "what is the time", "what is the date", "what is today's date", "what day is today",
    "how is the weather", "how's the weather", "is it cold outside", "is it raining", "will it rain", "is it sunny",
    "what is the temperature", "what's the temperature", "how hot is it", "what year is it", "what month is it",
    "what is new", "what's new", "what is going on", "what's going on", "what happened", "what do you think",
    "what do you mean", "what does that mean", "what does it mean", "what is it about", "how does it work",
    "how do you work", "how do you know", "how do i look", "how so", "why is that", "is that true", "is that right",
    "are you sure about that", "what else", "anything else", "what now", "what next", "like what", "can you help me",
    "can you hear me", "can you sing", "can you dance", "do you love me", "do you dream", "do you remember me",
    "do you know my name", "what is my name", "what did you say", "what did i say", "can you repeat that",
    "i didn't catch that", "i did not hear you", "speak slower", "speak up", "be quiet", "go to sleep", "wake up",
    "see you later", "talk to you later", "have a nice day", "i love you", "you are funny", "you're funny",
    "you are smart", "that is cool", "that is interesting", "that is not right", "where am i", "where is my phone",
    "where are my keys", "who is there", "who is it", "who is calling", "who won", "is it open", "is it late",
    "how much is it", "how much does it cost", "how far is it", "how long is it", "how long will it take",
    "when is it", "when does it start", "when does it end", "what is the score", "what's the score",
    "what is the news", "what's on tv", "what is for dinner", "what should i eat", "what should i do",
    "how is the traffic", "is the door locked", "are the lights on", "is anyone home", "what time is sunset",
    "when is sunrise", "what is the weather today", "how is your day", "what is up", "what can i say",
    "what is this song", "who is singing", "turn it on", "turn the lights off", "turn the music down",
]
DEVICES = ["the lights", "the kitchen lights", "the heating", "the fan", "the tv", "the radio", "the music",
           "the alarm", "the oven", "the air conditioning", "the porch light", "the coffee machine"]
TOPICS = ["the news", "the weather", "my schedule", "the football scores", "a story", "a poem", "a riddle",
          "a fun fact", "the traffic", "my reminders", "the latest headlines"]
EVERYDAY = [
    "turn on {d}", "turn off {d}", "switch off {d}", "dim {d}", "is {d} on", "did i leave {d} on",
    "read me {tp}", "tell me {tp}", "what's {tp} {t}", "play {g} music in the {r}", "pause the music",
    "play the next song", "skip this song", "who sings this song", "what song is this", "set the volume to {n}",
    "how old is {o}", "when is {o}'s birthday", "i'm hungry", "i'm tired", "i had a long day", "i feel sick",
    "i can't sleep", "i'm bored", "i'm going to bed", "i just got home", "i'm back", "i lost my keys",
    "what's the time in {p}", "what day is it", "what's the date today", "how many days until {h}",
    "when is {h} this year", "how many ounces are in a cup", "how many feet are in a mile", "what's {n} squared",
    "what's {n} divided by {m}", "what's {n} percent of {m}", "is {n} a prime number", "who is {fp}",
    "where was {fp} born", "when did {fp} die", "what is {fp} famous for", "what's the tallest building in {p}",
    "what's the population of {c}", "what's the currency of {c}", "what time does {s} open", "is {s} open {t}",
    "how do i get to {s}", "how long will it take to drive to {p}", "find me a {s} nearby", "order a pizza",
    "book a taxi to {p}", "book a table for {n} at {s}", "do i need an umbrella {t}", "what should i wear {t}",
    "wake me up at {n}", "wake me up in {n} minutes", "cancel my alarm", "snooze", "start a timer",
    "how much time is left on the timer", "stop the timer", "add {f} to the shopping list",
    "what's on my shopping list", "remove {f} from the list", "did anyone call", "read my messages",
    "reply that i'm on my way", "what's my next appointment", "move my meeting to {t}", "spell {w}",
    "what rhymes with {w}", "what's another word for {w}", "what's the opposite of {w}", "define {w}",
    "translate {w} into {lang}", "how do you say thank you in {lang}", "can you speak {lang}",
    "how do i make {f}", "how long do i boil {f}", "what temperature should i bake {f} at", "is {f} healthy",
    "are you listening", "can you hear me", "do you like music", "what's your favourite colour",
    "do you have a name", "are you a robot", "tell me a joke", "tell me another one", "that was funny",
    "that's not what i asked", "i meant {p}", "no i said {p}", "what about {p}", "and {t}", "how about {tp}",
]
HOLIDAYS = ["christmas", "easter", "halloween", "new year", "thanksgiving", "my birthday", "the weekend", "summer"]
FAMOUS = ["albert einstein", "marie curie", "shakespeare", "mozart", "the queen", "leonardo da vinci",
          "isaac newton", "cleopatra", "charles darwin", "ada lovelace", "nelson mandela", "frida kahlo"]
SHOPS = ["the bakery", "the supermarket", "the post office", "the bank", "the library", "the pharmacy",
         "a coffee shop", "the hardware store", "an italian restaurant", "the cinema", "the gym"]
ROOMS = ["kitchen", "living room", "bedroom", "bathroom", "office", "garden"]
LANGS = ["spanish", "french", "german", "italian", "japanese", "chinese", "portuguese"]
FILLERS = ["um", "uh", "er", "hmm", "like", "you know", "i mean", "well"]


def everyday_utterances(rng, n, short_questions=False):
    """Short turns, and everyday requests some of which carry a filler word where people hesitate (so
    that a partial ending in "the um" reads cut off)."""
    def fill(t):
        return t.format(d=rng.choice(DEVICES), tp=rng.choice(TOPICS), t=rng.choice(TIMES).format(n=rng.randint(2, 12)),
                        g=rng.choice(GENRES), r=rng.choice(ROOMS), n=rng.randint(2, 12), m=rng.randint(2, 99),
                        o=rng.choice(PEOPLE), p=rng.choice(PLACES), h=rng.choice(HOLIDAYS), c=rng.choice(COUNTRIES),
                        fp=rng.choice(FAMOUS), s=rng.choice(SHOPS), f=rng.choice(FOODS), w=rng.choice(WORDS),
                        lang=rng.choice(LANGS))
    for t in SHORT_TURNS + (SHORT_QUESTIONS if short_questions else []):
        yield "short", t
    for _ in range(n):
        q = fill(rng.choice(EVERYDAY))
        # A complement is often left out ("what's the time", "turn the heating off"): both forms are complete.
        if rng.random() < 0.3:
            words = q.split()
            if len(words) > 3 and words[-2] in ("in", "at", "for", "to", "on", "from", "with", "about", "near"):
                q = " ".join(words[:-2])
        words = q.split()
        r = rng.random()
        if r < 0.2 and len(words) > 2:
            k = rng.randint(1, len(words) - 1)
            q = " ".join(words[:k] + [rng.choice(FILLERS) + ","] + words[k:])
        elif r < 0.3:
            q = rng.choice(FILLERS) + ", " + q
        elif r < 0.4:
            q = rng.choice(SHORT_TURNS) + "|, " + q
        yield "everyday", q


FORTUNES = "/usr/share/games/fortunes"


def fortune_utterances():
    """Sentences of the fortune cookies (Debian's fortunes and fortunes-min): quotes, jokes, riddles and
    dialogue lines, the broadest natural English on this machine, questions and commas included."""
    if not os.path.isdir(FORTUNES):
        sys.exit("eou.py: %s is missing: install Debian's fortunes and fortunes-min (make train-deps)" % FORTUNES)
    for name in sorted(os.listdir(FORTUNES)):
        if "." in name or name in ("art", "ascii-art", "translate-me"):
            continue
        path = os.path.join(FORTUNES, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for fortune in text.split("\n%\n"):
            lines = [l.strip() for l in fortune.split("\n") if not re.match(r"\s*--", l)]
            for s in re.split(r"(?<=[.!?])\s+", " ".join(lines)):
                s = re.sub(r"^[QA]:\s*", "", s.strip()).strip("\"'`()[] ")
                if re.match(r"[A-Za-z]", s) and s[-1:] in ".!?" and 2 <= len(s.split()) <= 25:
                    yield "fortune", s


def wordnet_nouns():
    """Common nouns (tagged in SemCor at least once) by the lexicographer file of their most frequent sense:
    {"animal": [...], "food": [...], ...}."""
    files = {4: "act", 5: "animal", 6: "artifact", 8: "body", 13: "food", 15: "location", 18: "person",
             19: "phenomenon", 20: "plant", 27: "substance"}
    lexfile = {}
    with open(os.path.join(WORDNET, "data.noun"), encoding="latin-1") as f:
        for line in f:
            if not line.startswith("  "):
                field = line.split(" ", 2)
                lexfile[field[0]] = int(field[1])
    nouns = {v: [] for v in files.values()}
    with open(os.path.join(WORDNET, "index.noun"), encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue
            field = line.split()
            lemma, p = field[0], int(field[3])
            tagged, first = int(field[5 + p]), field[6 + p]
            name = files.get(lexfile.get(first))
            if name and tagged >= 1 and re.fullmatch(r"[a-z]+(_[a-z]+)?", lemma):
                nouns[name].append(lemma.replace("_", " "))
    return nouns


def plural(w):
    if re.search(r"(s|x|z|ch|sh)$", w):
        return w + "es"
    if re.search(r"[^aeiou]y$", w):
        return w[:-1] + "ies"
    return w + "s"


# Question and request shapes a voice assistant hears, over WordNet's open vocabulary, so that completeness is
# learnt from the shape ("how many ... does a ... have") rather than from a few fixed phrases.
SHAPES = [
    "what do {As} eat", "where do {As} live", "how long do {As} live", "how big is a {a}", "how fast can a {a} run",
    "can a {a} swim", "is a {a} dangerous", "are {As} smart", "why do {As} {iv}", "how many {Bs} does a {a} have",
    "do {As} have {Bs}", "what sound does a {a} make", "what is a baby {a} called", "show me a picture of a {a}",
    "what is a {r} used for", "how does a {r} work", "who invented the {r}", "when was the {r} invented",
    "where can i buy a {r}", "how much does a {r} cost", "how do i fix a broken {r}", "do i need a {r}",
    "which {r} should i buy", "is the {r} still on", "where did i put the {r}", "i need a new {r}",
    "what does a {e} do", "how do i become a {e}", "how much does a {e} earn", "who was the first {e}",
    "call the {e}", "is the {e} coming {t}", "i have to see the {e} {t}",
    "where is {l}", "how far is {l} from here", "what is the weather in {l}", "what time is it in {l}",
    "how do i get to {l}", "what is {l} famous for", "how many people live in {l}", "take me to {l}",
    "how do i grow {p}", "when should i plant {p}", "how often should i water the {p}", "is {p} poisonous",
    "is {f} good for you", "how long do i cook {f}", "how many calories are in {f}", "can dogs eat {f}",
    "where does {f} come from", "i want {f} for dinner", "do we have any {f} left", "add {f} to the list",
    "what is {s} made of", "is {s} dangerous", "what is {s} used for", "where does {s} come from",
    "why does my {b} hurt", "what does the {b} do", "how do i stretch my {b}", "i hurt my {b}",
    "what causes {h}", "will there be {h} {t}", "how does {h} happen", "is {h} dangerous",
    "what is {c}", "tell me about {c}", "how do you do {c}", "i want to learn {c}",
    "what's {n} plus {m}", "how much is {n} times {m}", "what is {m} minus {n}", "what's {m} divided by {n}",
    "tell me a fact about {As}", "look up {x}", "search for {x}", "find {x} near me", "what is the history of {x}",
    "why is {x} important", "what is the difference between {x} and {y}", "do you know anything about {x}",
    "how do you spell {x}", "what is another word for {x}", "define {x}", "who makes the best {x}",
]
INTRANSITIVE = ["sleep so much", "purr", "bark", "sing", "hibernate", "migrate", "shed", "bite", "hide", "fly south",
                "live in groups", "have stripes", "eat grass", "swim"]


def question_utterances(rng, n):
    nouns = wordnet_nouns()
    pick = lambda k: rng.choice(nouns[k])
    for _ in range(n):
        a, b = pick("animal"), pick("body")
        x, y = (pick(rng.choice(("artifact", "food", "plant", "substance", "animal", "act"))) for _ in range(2))
        q = rng.choice(SHAPES).format(
            a=a, As=plural(a), Bs=plural(b), b=b, r=pick("artifact"), e=pick("person"), l=pick("location"),
            p=pick("plant"), f=pick("food"), s=pick("substance"), h=pick("phenomenon"), c=pick("act"), x=x, y=y,
            iv=rng.choice(INTRANSITIVE), n=rng.randint(2, 100), m=rng.randint(2, 1000),
            t=rng.choice(TIMES).format(n=rng.randint(2, 12)))
        r = rng.random()
        if r < 0.15:
            q = rng.choice(INTROS).format(t=rng.choice(TIMES).format(n=3)) + ", " + q
        elif r < 0.22:
            q = q + "|, please"
        elif r < 0.3:
            words = q.split()
            k = rng.randint(1, len(words) - 1)
            q = " ".join(words[:k] + [rng.choice(FILLERS) + ","] + words[k:])
        yield "question", q


def smalltalk_utterances():
    import smalltalk
    for qs, _ in smalltalk.INTENTS:
        for q in qs:
            yield "smalltalk", q


TEMPLATED = ("grammar", "everyday", "question")
COMPLEMENT = {"from", "to", "in", "at", "for", "on", "with", "about", "near", "by", "during", "after", "before",
              "into", "this", "next", "tomorrow", "today", "tonight"}


def drop_complement(text):
    """text without its last phrase when that starts with a preposition or a time word and leaves at least
    three words ("remind me to call my sister tomorrow" -> "remind me to call my sister"); else None."""
    words = text.replace(",", " ,").split()
    for i in range(len(words) - 1, 2, -1):
        if words[i] in COMPLEMENT and words[i - 1] not in COMPLEMENT | {",", "the", "a", "to"}:
            return " ".join(words[:i]).replace(" ,", ",")
    return None


def prepare(args):
    rng = random.Random(args.seed)
    seen = set()
    train, valid = [], []
    counts = {}
    sources = [corpus_utterances(args.data), wordnet_examples(), grammar_utterances(rng, args.grammar),
               smalltalk_utterances(), everyday_utterances(rng, args.everyday, args.short_questions),
               question_utterances(rng, args.questions), fortune_utterances()]
    held = set()
    if args.exclude and os.path.exists(args.exclude):
        with open(args.exclude, encoding="utf-8") as f:
            rows = [line.rstrip("\n").partition("\t") for line in f if not line.startswith("#")]
        # its complete utterances, and the longer partials (not "what is", which many utterances are)
        held = {t for label, _, t in rows if label == "1" or len(t.split()) >= 3}
    def with_short_forms(gen):
        """A spoken request often leaves its trailing complement out ("how far is the moon [from here]"):
        the templated sources also give the shorter form as a complete utterance, so that an ending which
        could go on is not taught to be a cut-off just because the template always went on."""
        for src, text in gen:
            yield src, text
            if src in TEMPLATED and rng.random() < 0.5:
                short = drop_complement(text)
                if short:
                    yield src, short

    for gen in map(with_short_forms, sources):
        for src, text in gen:
            form = asr_form(text)
            if form is None:
                continue
            key = form.replace(" ,", "").replace(" |", "")
            if key in held:  # the evaluation set stays out of training
                counts["excluded"] = counts.get("excluded", 0) + 1
                continue
            if key in seen:
                continue
            seen.add(key)
            # split by text so that a validation utterance never occurs in training
            to_valid = zlib.crc32(key.encode()) % 1000 < args.valid_permille
            (valid if to_valid else train).append("%s\t%s" % (src, form))
            counts[src] = counts.get(src, 0) + 1
    rng.shuffle(train)
    rng.shuffle(valid)
    os.makedirs(args.out, exist_ok=True)
    for name, rows in (("eou-train", train), ("eou-valid", valid)):
        with gzip.open(os.path.join(args.out, name + ".tsv.gz"), "wt", encoding="utf-8", compresslevel=9) as f:
            f.write("\n".join(rows) + "\n")
    print(json.dumps({"sources": counts, "train": len(train), "valid": len(valid)}))


# Utterances to speak for `voxpipe bench eou-speech` (the recogniser's own text): users' turns mostly, by source.
SPEECH_QUOTA = {"user": 700, "grammar": 450, "everyday": 600, "question": 450, "fortune": 450, "example": 250,
                "answer": 100, "short": None}
SPEECH_SHORT_REPEATS = 3  # each short turn in three voices: they are few and what people say most


def speech_texts(args):
    """Seeded choices of eou-train and eou-valid utterances (source TAB text) for `voxpipe bench eou-speech`:
    SPEECH_QUOTA of each source from training, an eighth of it from validation."""
    rng = random.Random(args.seed)
    for name, scale in (("train", 1.0), ("valid", 0.125)):
        by_src = {}
        with gzip.open(os.path.join(args.data, "eou-%s.tsv.gz" % name), "rt", encoding="utf-8") as f:
            for line in f:
                src, _, text = line.rstrip("\n").partition("\t")
                by_src.setdefault(src, []).append(text)
        out = []
        for src in sorted(SPEECH_QUOTA):
            pool = by_src.get(src, [])
            quota = SPEECH_QUOTA[src]  # None: all of them
            pick = rng.sample(pool, len(pool) if quota is None else min(int(quota * scale), len(pool)))
            out += [(src, t) for t in pick * (SPEECH_SHORT_REPEATS if src == "short" else 1)]
        rng.shuffle(out)
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "eou-speech-%s.tsv" % name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join("%s\t%s\n" % r for r in out))
        print(json.dumps({"out": path, "utterances": len(out)}))


# ------------------------------------------------------------------------------------------ data for training

def load_tsv(path):
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            src, _, text = line.rstrip("\n").partition("\t")
            if text:
                rows.append((src, text.split()))
    return rows


class Noise:
    """Recognition errors: per utterance an error rate, then per word a substitution (a random word of the
    vocabulary, content words as often as function words), a deletion or an inserted short word. The last word is
    only ever substituted, so a complete utterance stays complete in shape."""

    RATES = (0.0, 0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
    SHORT = "a the and i to of it in uh is that".split()

    def __init__(self, vocab, rng):
        self.vocab, self.rng = vocab, rng

    def __call__(self, words, rate=None):
        rng = self.rng
        rate = rng.choice(self.RATES) if rate is None else rate
        if rate == 0:
            return words
        out = []
        last = len(words) - 1
        while last > 0 and words[last] in MARKS:
            last -= 1
        for i, w in enumerate(words):
            if w in MARKS or rng.random() >= rate:
                out.append(w)
                continue
            r = rng.random()
            if r < 0.6 or i == last:
                out.append(rng.choice(self.vocab))
            elif r < 0.85:
                continue
            else:
                out += [w, rng.choice(self.SHORT)]
        return out if any(w not in MARKS for w in out) else words


# A boundary after which the words so far could be a whole turn on their own, though this utterance went
# on: a sentence ended there ("|": "thanks | what's the weather", "set a timer | , please"), or the words so
# far are a complete utterance of the data ("what time is it" before "in tokyo"). Labelling such a boundary a
# cut-off taught the scorer that everyday complete requests go on ("turn off the lights in the kitchen" scored
# 0.003, "what time is it" 0.0000); it gets the target AMBIGUOUS instead, and validation leaves it out.
AMBIGUOUS = 0.5
AMBIGUOUS_MIN_WORDS = 3  # shorter prefixes ("how", "what time", "can you") go on far more often than they end
COMPLETE = set()  # tuples of the words of every complete utterance of the data (train() fills it)


def labelled(words, end=(1.0, 1.0)):
    """(words without markers, weight of each boundary, target of each boundary): the last boundary is complete
    (1); an earlier one is a cut-off (0) that weighs 2 before a comma, or AMBIGUOUS (weight 1) where the words so
    far could end a turn. end: the last boundary's (target, weight) where it is not a complete end (a speech row
    cut at a pause)."""
    plain, weight, target = [], [], []
    for w in words:
        if w in MARKS:
            if weight and target[-1] != AMBIGUOUS:
                weight[-1], target[-1] = (2.0, 0.0) if w == "," else (1.0, AMBIGUOUS)
            continue
        plain.append(w)
        weight.append(1.0)
        target.append(AMBIGUOUS if len(plain) >= AMBIGUOUS_MIN_WORDS and tuple(plain) in COMPLETE else 0.0)
    if target:
        target[-1], weight[-1] = end
    return plain, weight, target


def load_speech(path, min_words):
    """The recogniser's own text from `voxpipe bench eou-speech` (JSON lines): [(words, (target, weight))].
    A row at the end of an utterance is complete (1). A row at a pause is a cut-off (0), weighing double where
    the speaker paused at a comma, or AMBIGUOUS where the words said so far could end a turn (a sentence ended
    there, or they are a complete utterance of the data; the row's "said" ends with the marker that followed).
    Each utterance's end and its pause weigh the same whatever the number of rows that show them (a partial and
    a final), so that a text the recogniser garbles beyond reading is taught as neither complete nor cut off."""
    utts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                utts.setdefault(r["utt"], []).append(r)
    out = []
    for rows in utts.values():
        ends = [r for r in rows if r["label"] == 1]
        cuts = [r for r in rows if r["label"] == 0]
        for r in ends:
            out.append((r["text"].split(), (1.0, 1.0 / len(ends))))
        for r in cuts:
            said = r["said"].split()  # the words said, then the marker after them if there was one
            after = said[-1] if said[-1] in MARKS else None
            said = [w for w in said if w not in MARKS]
            w = 1.0 / len(cuts)
            if after == "|" or (len(said) >= min_words and tuple(said) in COMPLETE):
                out.append((r["text"].split(), (AMBIGUOUS, w)))
            else:
                out.append((r["text"].split(), (0.0, 2 * w if after == "," else w)))
    return [x for x in out if x[0]]


# ------------------------------------------------------------------------------------------ tokenizer

class ByteBPE:
    """The GGUF file's byte-level BPE for recogniser text (ASCII): a fallback where the tokenizers package is missing
    (CPU smoke tests); on the training machine it is checked against tokenizers' output."""

    PAT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[a-z]+| ?[0-9]+| ?[^\sa-z0-9]+|\s+(?!\S)|\s+")

    def __init__(self, tokens, merges):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(merges)}
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
        cs = bs[:]
        n = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        self.byte = {b: chr(c) for b, c in zip(bs, cs)}

    def piece(self, s):
        parts = [self.byte[b] for b in s.encode("utf-8")]
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: self.ranks.get((parts[i], parts[i + 1]), 1 << 30))
            if (parts[best], parts[best + 1]) not in self.ranks:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return [self.ids[p] for p in parts]

    def encode(self, text):
        return [i for p in self.PAT.findall(text) for i in self.piece(p)]


class Vocab:
    """What write_gguf needs of a tokenizer, taken from the initial model's file (so the tokenizer is identical)."""

    def __init__(self, meta):
        self.meta = meta

    def get_vocab(self):
        return {t: i for i, t in enumerate(self.meta["tokenizer.ggml.tokens"])}

    def token_to_id(self, s):
        return self.meta["tokenizer.ggml.tokens"].index(s)

    def to_str(self):
        return json.dumps({"model": {"merges": self.meta["tokenizer.ggml.merges"]}})


class Encoder:
    """Word -> token ids, cached: recogniser text has no punctuation, so a word's tokens never depend on its
    neighbours (the pre-tokenizer splits before every space)."""

    def __init__(self, reader, log):
        meta = reader.meta
        self.bpe = ByteBPE(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"])
        self.hf = None
        try:
            from gguf_read import load_tokenizer
            self.hf = load_tokenizer(reader)
        except ImportError:
            log("tokenizers is not installed: using the pure-Python byte-level BPE")
        self.cache = {}
        self.head = self.encode_text("<|im_start|>user\n")
        self.end = meta["tokenizer.ggml.tokens"].index("<|im_end|>")

    def encode_text(self, text):
        if self.hf is not None:
            return self.hf.encode(text).ids
        start = "<|im_start|>"
        if text.startswith(start):
            return [self.bpe.ids[start]] + self.bpe.encode(text[len(start):])
        return self.bpe.encode(text)

    def word(self, w, first):
        key = (w, first)
        ids = self.cache.get(key)
        if ids is None:
            ids = self.encode_text(w if first else " " + w)
            self.cache[key] = ids
        return ids

    def utterance(self, words):
        """Token ids of "<|im_start|>user\\n" + words, and the index of each word's last token."""
        ids, ends = list(self.head), []
        for i, w in enumerate(words):
            ids += self.word(w, i == 0)
            ends.append(len(ids) - 1)
        return ids, ends

    def check(self, rows, log):
        """Per-word encoding equals the whole text's (and, with tokenizers, the fallback BPE equals it)."""
        bad = fb = 0
        for _, words in rows:
            words = [w for w in words if w not in MARKS]
            whole = self.encode_text("<|im_start|>user\n" + " ".join(words))
            if whole != self.utterance(words)[0]:
                bad += 1
            if self.hf is not None and self.bpe.encode(" ".join(words)) != self.hf.encode(" ".join(words)).ids:
                fb += 1
        log("tokenizer check on %d utterances: %d per-word mismatches, %d fallback mismatches" % (len(rows), bad, fb))
        return bad


# ------------------------------------------------------------------------------------------ training

def make_batch(enc, items, torch, device):
    """items: labelled(). Right-padded ids, and per scored boundary: row, position, target, weight."""
    seqs, rows, cols, labels, weights = [], [], [], [], []
    for r, (words, w, target) in enumerate(items):
        ids, ends = enc.utterance(words)
        seqs.append(ids)
        for j, e in enumerate(ends):
            rows.append(r)
            cols.append(e)
            labels.append(target[j])
            weights.append(w[j])
    T = max(len(s) for s in seqs)
    x = torch.zeros(len(seqs), T, dtype=torch.long)
    lm = torch.zeros(len(seqs), T, dtype=torch.bool)
    for r, s in enumerate(seqs):
        x[r, :len(s)] = torch.tensor(s)
        lm[r, len(enc.head) - 1:len(s) - 1] = True  # next-token loss on the words (targets are x[:, 1:])
    t = lambda v, dt: torch.tensor(v, dtype=dt, device=device)
    return (x.to(device), lm.to(device), t(rows, torch.long), t(cols, torch.long), t(labels, torch.float32),
            t(weights, torch.float32))


def auc(scores, labels):
    """Area under the ROC curve (Mann-Whitney, ties counted half)."""
    pairs = sorted(zip(scores, labels))
    n_pos = sum(labels)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid = (i + j + 1) / 2.0  # 1-based average rank
        rank_sum += mid * sum(l for _, l in pairs[i:j])
        i = j
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def score_set(model, enc, items, torch, F, device, autocast, batch=512):
    """P(<|im_end|>) at every boundary of every item: lists of (score, label, comma-boundary, src)."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(items), batch):
            chunk = items[i:i + batch]
            x, _, rows, cols, labels, weights = make_batch(enc, [item[1:] for item in chunk], torch, device)
            with autocast():
                logits = model(x)
            lp = logits[rows, cols].float().log_softmax(-1)[:, enc.end].exp()
            srcs = [chunk[r][0] for r in rows.tolist()]
            out += [x for x in zip(lp.tolist(), labels.tolist(), (weights > 1.5).tolist(), srcs)
                    if x[1] in (0.0, 1.0)]  # an AMBIGUOUS boundary is neither
    model.train()
    return out


def summarise(scored):
    s = [x[0] for x in scored]
    l = [x[1] for x in scored]
    res = {"auc": round(auc(s, l), 4), "n_complete": int(sum(l)), "n_cut": len(l) - int(sum(l))}
    comma = [x for x in scored if x[1] == 1 or x[2]]
    res["auc_complete_vs_comma_cuts"] = round(auc([x[0] for x in comma], [x[1] for x in comma]), 4)
    res["by_source"] = {src: round(auc([x[0] for x in scored if x[3] == src], [x[1] for x in scored if x[3] == src]), 4)
                        for src in sorted({x[3] for x in scored})}
    roc = []
    pos = sorted(x[0] for x in scored if x[1] == 1)
    neg = [x[0] for x in scored if x[1] == 0]
    cneg = [x[0] for x in scored if x[2]]
    for q in (0.05, 0.1, 0.2, 0.3, 0.5):  # thresholds that keep (1-q) of complete utterances
        th = pos[int(q * len(pos))]
        roc.append({"threshold": float("%.4g" % th), "complete_above": round(1 - q, 2),
                    "cut_above": round(sum(1 for v in neg if v >= th) / max(len(neg), 1), 4),
                    "comma_cut_above": round(sum(1 for v in cneg if v >= th) / max(len(cneg), 1), 4)})
    for th in (0.1, 0.2, 0.3, 0.5, 0.7):
        roc.append({"threshold": th, "complete_above": round(sum(1 for v in pos if v >= th) / max(len(pos), 1), 4),
                    "cut_above": round(sum(1 for v in neg if v >= th) / max(len(neg), 1), 4),
                    "comma_cut_above": round(sum(1 for v in cneg if v >= th) / max(len(cneg), 1), 4)})
    res["roc"] = roc
    return res


def train(args):
    import contextlib
    import torch
    import torch.nn.functional as F
    if not hasattr(F, "scaled_dot_product_attention"):  # PyTorch < 2.0 (Debian's), for CPU smoke tests
        def sdpa(q, k, v, is_causal=False, attn_mask=None):
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            if is_causal:
                s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
            return s.softmax(-1) @ v
        F.scaled_dot_product_attention = sdpa
    from gguf_read import load_llama
    from train import Llama, write_gguf

    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    logf = open(os.path.join(args.out, "eou.log"), "w")

    def log(msg):
        line = "[%6.1fs] %s" % (time.time() - t0, msg)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    device = args.device if (args.device != "cuda" or torch.cuda.is_available()) else "cpu"
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True

    def autocast():
        return torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()

    model, reader = load_llama(args.init)
    model = model.to(device)
    for b in model.blocks:
        b.drop.p = args.dropout
    enc = Encoder(reader, log)
    train_rows = load_tsv(os.path.join(args.data, "eou-train.tsv.gz"))
    valid_rows = load_tsv(os.path.join(args.data, "eou-valid.tsv.gz"))[:args.valid]
    report_check = enc.check(valid_rows[:2000], log)  # must be 0: the engine encodes the whole text
    vocab = sorted({w for _, ws in train_rows for w in ws if w not in MARKS})
    global AMBIGUOUS, AMBIGUOUS_MIN_WORDS
    AMBIGUOUS, AMBIGUOUS_MIN_WORDS = args.ambiguous, args.ambiguous_min_words
    COMPLETE.update(tuple(w for w in ws if w not in MARKS) for _, ws in train_rows)
    log("%d complete utterances mark their prefixes ambiguous (target %.2f)" % (len(COMPLETE), AMBIGUOUS))
    noise = Noise(vocab, rng)
    by_src = {}
    for src, ws in train_rows:
        by_src.setdefault(src, []).append(ws)
    speech = load_speech(args.speech, AMBIGUOUS_MIN_WORDS) if args.speech else []
    if speech:
        by_src["speech"] = speech
    weights = {s: args.weights.get(s, 0.1) for s in by_src}
    log("train %s, valid %d, vocab %d, weights %s" % ({s: len(v) for s, v in by_src.items()}, len(valid_rows),
                                                     len(vocab), weights))
    srcs = sorted(by_src)
    cum = []
    tot = 0.0
    for s in srcs:
        tot += weights[s]
        cum.append(tot)

    def draw():
        """An item for labelled(): speech rows carry the recogniser's own errors and their end's label."""
        r = rng.random() * tot
        s = srcs[next(i for i, c in enumerate(cum) if r < c)]
        if s == "speech":
            words, end = rng.choice(speech)
            return labelled(words, end)
        return labelled(noise(rng.choice(by_src[s])))

    vrng = random.Random(args.seed + 7)
    vnoise = Noise(vocab, vrng)
    valid_clean = [(s,) + labelled(ws) for s, ws in valid_rows]
    valid_noisy = [(s,) + labelled(vnoise(ws, vrng.choice((0.1, 0.2, 0.3)))) for s, ws in valid_rows]
    # Speech rows of held-out texts: only their last boundary (the pause or the end) is scored; -1 is no label.
    valid_speech = []
    for words, (target, _) in (load_speech(args.speech_valid, AMBIGUOUS_MIN_WORDS) if args.speech_valid else []):
        plain, weight, _ = labelled(words)
        valid_speech.append(("speech", plain, weight, [-1.0] * (len(plain) - 1) + [target]))

    def evaluate(tag):
        res = {"clean": summarise(score_set(model, enc, valid_clean, torch, F, device, autocast)),
               "noisy": summarise(score_set(model, enc, valid_noisy, torch, F, device, autocast))}
        if valid_speech:
            res["speech"] = summarise(score_set(model, enc, valid_speech, torch, F, device, autocast))
            log("%s: AUC on the recogniser's text of held-out speech %.4f" % (tag, res["speech"]["auc"]))
        # The checkpoint kept: the best on noisy text, or on noisy text and held-out speech together.
        res["select"] = res["noisy"]["auc"] if not valid_speech else (res["noisy"]["auc"] + res["speech"]["auc"]) / 2
        log("%s: AUC clean %.4f noisy %.4f (comma cuts %.4f)" % (tag, res["clean"]["auc"], res["noisy"]["auc"],
                                                                res["noisy"]["auc_complete_vs_comma_cuts"]))
        return res

    def export(state, name):
        """state as GGUF F16; the scorer never sees more than a partial, so a small context (KV cache)."""
        m = Llama(**{k: v for k, v in model.cfg.items() if k != "ctx"}, ctx=args.ctx)
        m.load_state_dict({k: v.detach().float().cpu() for k, v in state.items()})
        return write_gguf(os.path.join(args.out, name), m, Vocab(reader.meta), "voxpipe-eou", args.dtype)

    report = {"args": {k: v for k, v in vars(args).items()}, "torch": torch.__version__, "device": device,
              "tokenizer_mismatches": report_check, "tokenizers_package": enc.hf is not None}
    report["before"] = evaluate("before training (the draft)")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.05)
    best = (-1.0, None, 0)
    history = []
    start = time.time()
    step = 0
    pos_weight = args.pos_weight
    steps = args.steps
    while step < steps and time.time() - start < args.seconds:
        if step == 50:  # shorten the schedule to what fits in --seconds, so the learning rate decays in time
            fit = int(0.9 * args.seconds / ((time.time() - start) / 50))
            if fit < steps:
                log("%d steps fit in %.0fs, not %d" % (fit, args.seconds, steps))
                steps = fit
        lr = args.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        items = [draw() for _ in range(args.batch)]
        x, lm, rows, cols, labels, w = make_batch(enc, items, torch, device)
        with autocast():
            logits = model(x)
        lp = logits[rows, cols].float().log_softmax(-1)[:, enc.end]
        # log(1 - p) computed stably from log p
        l_neg = torch.log(-torch.expm1(lp.clamp(max=-1e-6)))
        bce = -(labels * pos_weight * lp + (1 - labels) * l_neg) * w
        bce = bce.sum() / (w * torch.where(labels > 0, pos_weight, 1.0)).sum()
        lm_logits = logits[:, :-1][lm[:, :-1]].float()
        lm_loss = F.cross_entropy(lm_logits, x[:, 1:][lm[:, :-1]])
        loss = bce + args.lm_weight * lm_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % args.eval_every == 0 or step == steps:
            res = evaluate("step %d %.0fs lr %.2e bce %.4f lm %.3f" % (step, time.time() - start, lr, bce.item(),
                                                                       lm_loss.item()))
            history.append({"step": step, "seconds": round(time.time() - start, 1), "bce": round(bce.item(), 4),
                            "auc_clean": res["clean"]["auc"], "auc_noisy": res["noisy"]["auc"],
                            "auc_speech": res["speech"]["auc"] if "speech" in res else None})
            if res["select"] > best[0]:
                best = (res["select"], {k: t.detach().clone() for k, t in model.state_dict().items()}, step)
                if args.keep_best:  # a run cut short (a timeout) still leaves its best model
                    export(best[1], "voxpipe-eou-best-%s.gguf" % args.dtype)
    if best[1] is None or (history and history[-1]["step"] != step):
        res = evaluate("final step %d" % step)
        if res["select"] > best[0]:
            best = (res["select"], {k: t.detach().clone() for k, t in model.state_dict().items()}, step)
    model.load_state_dict(best[1])
    report["history"] = history
    report["steps"] = step
    report["best_step"] = best[2]
    report["after"] = evaluate("best (step %d)" % best[2])
    path = os.path.join(args.out, "voxpipe-eou-%s.gguf" % args.dtype)
    report["gguf_bytes"] = export(best[1], os.path.basename(path))
    if args.keep_best and os.path.exists(os.path.join(args.out, "voxpipe-eou-best-%s.gguf" % args.dtype)):
        os.remove(os.path.join(args.out, "voxpipe-eou-best-%s.gguf" % args.dtype))
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log("exported %s (%d bytes)" % (path, report["gguf_bytes"]))


def soup(args):
    """Weight-space interpolation of a fine-tuned scorer with the one it was fine-tuned from (WiSE-FT, Wortsman
    et al. 2022): (1 - alpha) * tuned + alpha * base for every tensor. Fine-tuning on the everyday data made the
    scorer sure of assistant requests but less sure of read and recognised-with-errors sentences, which the base
    scored well; the interpolation keeps most of both (models/README.md). Standard library only: the tuned file
    (F16/F32 tensors) is copied and its tensors overwritten in place, so its metadata and layout are kept."""
    from gguf_read import TYPE_F16, TYPE_F32, Reader
    base, tuned = Reader(args.base), Reader(args.tuned)
    out = bytearray(tuned.buf[:])
    for name, (typ, shape, off) in tuned.tensors.items():
        if typ not in (TYPE_F16, TYPE_F32):
            raise SystemExit("eou.py soup: %s: the tuned file must be F16/F32 (got type %d)" % (name, typ))
        if name not in base.tensors or base.tensors[name][1] != shape:
            raise SystemExit("eou.py soup: %s: the base file has no tensor of shape %s" % (name, shape))
        mixed = [(1 - args.alpha) * t + args.alpha * b for t, b in zip(tuned.floats(name), base.floats(name))]
        struct.pack_into("<%d%s" % (len(mixed), "e" if typ == TYPE_F16 else "f"), out, off, *mixed)
    with open(args.out, "wb") as f:
        f.write(out)
    print(json.dumps({"out": args.out, "alpha": args.alpha, "tensors": len(tuned.tensors)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="recogniser-form utterances (standard library only)")
    p.add_argument("--data", default="build/train-data", help="prepare.py's output")
    p.add_argument("--out", default="build/eou-data")
    p.add_argument("--grammar", type=int, default=40000, help="utterances drawn from the request grammar")
    p.add_argument("--everyday", type=int, default=30000, help="utterances drawn from the everyday turns")
    p.add_argument("--questions", type=int, default=40000, help="utterances drawn from the question shapes")
    p.add_argument("--short-questions", action="store_true", help="add SHORT_QUESTIONS to the short turns")
    p.add_argument("--exclude", default="internal/bench/testdata/eou-everyday.tsv",
                   help="a labelled set (voxpipe bench eou) whose texts are kept out of training")
    p.add_argument("--valid-permille", type=int, default=20)
    p.add_argument("--seed", type=int, default=1234)
    t = sub.add_parser("train", help="fine-tune the scorer (PyTorch)")
    t.add_argument("--data", default="build/eou-data")
    t.add_argument("--init", default="models/voxpipe-demo-draft-q8_0.gguf")
    t.add_argument("--out", default="build/eou")
    t.add_argument("--steps", type=int, default=3000)
    t.add_argument("--seconds", type=float, default=110, help="stop training after this long")
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--lm-weight", type=float, default=0.2)
    t.add_argument("--pos-weight", type=float, default=3.0, help="weight of a complete boundary against a cut")
    t.add_argument("--weights", type=json.loads, default={"user": 0.08, "answer": 0.04, "example": 0.08,
                                                          "grammar": 0.15, "everyday": 0.15, "short": 0.05,
                                                          "question": 0.2, "fortune": 0.25, "speech": 0.15},
                   help="JSON: share of each source in a batch")
    t.add_argument("--speech", default="", help="`voxpipe bench eou-speech` rows of training texts (JSON lines)")
    t.add_argument("--speech-valid", default="", help="the same of validation texts: scored, and part of the checkpoint choice")
    t.add_argument("--valid", type=int, default=4000, help="validation utterances scored")
    t.add_argument("--eval-every", type=int, default=500)
    t.add_argument("--ctx", type=int, default=128, help="context length written to the GGUF file")
    t.add_argument("--keep-best", action="store_true", help="also export each new best checkpoint as it is found")
    t.add_argument("--ambiguous", type=float, default=AMBIGUOUS,
                   help="target of a boundary where the words so far could end a turn but the utterance went on")
    t.add_argument("--ambiguous-min-words", type=int, default=AMBIGUOUS_MIN_WORDS,
                   help="a prefix that is a complete utterance of the data is ambiguous from this many words")
    t.add_argument("--dtype", default="f16", choices=("f16", "q8_0"), help="the exported file's weights")
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--device", default="cuda")
    st = sub.add_parser("speech-texts", help="utterances to speak for voxpipe bench eou-speech (standard library)")
    st.add_argument("--data", default="build/eou-data", help="prepare's output")
    st.add_argument("--out", default="build/eou-data")
    st.add_argument("--seed", type=int, default=1234)
    m = sub.add_parser("soup", help="interpolate a fine-tuned scorer's weights with its base (standard library)")
    m.add_argument("--base", required=True, help="the GGUF the tuned one was fine-tuned from")
    m.add_argument("--tuned", required=True, help="the fine-tuned GGUF (F16)")
    m.add_argument("--alpha", type=float, default=0.5, help="the base's share")
    m.add_argument("--out", required=True)
    args = ap.parse_args()
    {"prepare": prepare, "train": train, "soup": soup, "speech-texts": speech_texts}[args.cmd](args)


if __name__ == "__main__":
    main()
