#!/usr/bin/env python3
"""Build the demo assistant's training corpus from freely licensed Debian packages.

Sources (installed by `make train-deps`):
  wordnet-base  /usr/share/wordnet/data.*       WordNet 3.0 licence (Princeton)
  dict-foldoc   /usr/share/dictd/foldoc.*       GNU FDL 1.1+ (Denis Howe)
  dict-jargon   /usr/share/dictd/jargon.*       public domain (the Jargon File 4.4.7)
plus the hand-written small talk in smalltalk.py (this repository's own).

Output: JSON lines, one dialogue per line: {"messages": [{"role": ..., "content": ...}], "src": ...}
split into train.jsonl / valid.jsonl / heldout.jsonl (questions about headwords that never appear
in training, for the model card's unedited sample answers). Standard library only, seeded.
"""
import argparse
import gzip
import json
import os
import random
import re

import quoting
import smalltalk

SYSTEM_PROMPT = ("You are voxpipe, a friendly voice assistant. "
                 "Answer in one or two short spoken sentences.")

WORDNET = "/usr/share/wordnet"
DICTD = "/usr/share/dictd"
MAX_ANSWER_CHARS = 220


def article(word):
    return "an" if word[:1].lower() in "aeiou" else "a"


def sentence_case(s):
    return s[:1].upper() + s[1:] if s else s


def finish(s):
    s = re.sub(r"\s+", " ", s).strip().rstrip(";:,")
    if s and s[-1] not in ".!?":
        s += "."
    return s


def first_sentences(text, limit=MAX_ANSWER_CHARS):
    """Whole sentences from the start of text, at most limit characters (at least one)."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
    out = ""
    for p in parts:
        if out and len(out) + 1 + len(p) > limit:
            break
        out = (out + " " + p).strip()
    if len(out) > limit + 80:  # one very long sentence: cut at a clause
        cut = out.rfind(",", 0, limit)
        out = out[:cut] if cut > 40 else out[:limit].rsplit(" ", 1)[0]
    return finish(out)


# ---------------------------------------------------------------- WordNet

def wordnet_entries():
    """Yield (pos, word, definition, examples, common) for each lemma's most frequent sense.

    word keeps the case WordNet's synset gives it (proper nouns are capitalised there, not in the
    index); common says whether the lemma occurs in WordNet's sense-tagged corpus.
    """
    for pos, name in (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv")):
        synsets = {}
        with open(os.path.join(WORDNET, "data." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                head, _, gloss = line.partition("|")
                fields = head.split()
                n_words = int(fields[3], 16)
                words = [re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in fields[4:4 + 2 * n_words:2]]
                synsets[fields[0]] = (words, gloss.strip())
        with open(os.path.join(WORDNET, "index." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                lemma = fields[0].replace("_", " ")
                n_synsets = int(fields[2])
                tagged = int(fields[-n_synsets - 1])
                entry = synsets.get(fields[-n_synsets])
                if not entry or any(c.isdigit() for c in lemma) or len(lemma.split()) > 2:
                    continue
                words, gloss = entry
                word = next((w for w in words if w.lower() == lemma), lemma)
                defs, examples = [], []
                for part in gloss.split(";"):
                    part = part.strip()
                    if part.startswith('"'):
                        examples.append(part.strip('"').strip())
                    elif part and not examples:
                        defs.append(part)
                if defs:
                    yield pos, word, "; ".join(defs), examples, tagged > 0


TAXONOMY = re.compile(r"\b(genus|family|order|class|phylum|subfamily|suborder|division)\b", re.I)


def wordnet_dialogues(rng):
    for pos, word, definition, examples, common in wordnet_entries():
        definition = re.sub(r"\s*\([^)]*\)", "", definition).strip()
        if len(definition) < 8 or TAXONOMY.search(definition):
            continue
        if not common and rng.random() > 0.3:  # keep rare words, but fewer of them
            continue
        if pos == "n":
            proper = word[:1].isupper()
            countable = re.match(r"(a|an) ", definition) is not None
            x = word if proper or not countable else article(word) + " " + word
            q = rng.choice(["What is {x}?", "What's {x}?", "Tell me about {x}.", "Define {w}.",
                            "What does {w} mean?", "Do you know what {x} is?"]).format(x=x, w=word)
            a = "{} is {}".format(sentence_case(x), definition)
        elif pos == "v":
            q = rng.choice(["What does it mean to {w}?", "What does {w} mean?", "Define the verb {w}."]).format(w=word)
            a = "To {} is to {}".format(word, definition)
        else:
            q = rng.choice(["What does {w} mean?", "What is the meaning of {w}?", "Define {w}."]).format(w=word)
            a = "{} means {}".format(sentence_case(word), definition)
        a = first_sentences(a)
        yield word, q, a
        if examples and rng.random() < 0.35:
            ex = finish(sentence_case(examples[0]))
            q2 = rng.choice(["Use {w} in a sentence.", "Can you use {w} in a sentence?", "Give me an example with {w}."])
            yield word, q2.format(w=word), "Sure: " + ex


# ---------------------------------------------------------------- dictd (FOLDOC, Jargon File)

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64num(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def dictd_entries(name):
    data = gzip.open(os.path.join(DICTD, name + ".dict.dz")).read()
    with open(os.path.join(DICTD, name + ".index"), encoding="utf-8") as f:
        for line in f:
            head, off, size = line.rstrip("\n").split("\t")[:3]
            if head.startswith("00-database"):
                continue
            yield head, data[b64num(off):b64num(off) + b64num(size)].decode("utf-8", "replace")


def clean_dict_body(body):
    body = re.sub(r"\{([^{}]*?)\s*\(https?://[^)]*\)\}", r"\1", body)  # {text (url)}
    body = re.sub(r"\{([^{}]*)\}", r"\1", body)
    body = re.sub(r"<[^>]*>", "", body)
    body = re.sub(r"https?://\S+", "", body)
    body = re.sub(r"\[[^\]]*\]", "", body)
    body = re.sub(r"\(\d{4}-\d{2}-\d{2}\)", "", body)
    return re.sub(r"\s+", " ", body).strip()


def dict_dialogues(name, rng):
    for head, entry in dictd_entries(name):
        lines = entry.split("\n")
        head = lines[0].strip() or head
        if "," in head:
            continue
        body_lines = [l for l in lines[1:] if l.strip()]
        if not body_lines or len(head) > 40 or not re.search(r"[A-Za-z]", head):
            continue
        body = " ".join(l.strip() for l in body_lines)
        body = re.sub(r"^(?:[a-z]+\.\s*)+", "", body)  # Jargon part of speech: "n.", "adj."
        body = re.sub(r"^\s*1\.\s*", "", clean_dict_body(body))
        body = re.sub(r"^(?:(?:n|v|adj|adv|vt|vi|interj|pl|prep|conj)\.,?\s*)+", "", body)
        body = re.sub(r"\s+\.", ".", body)
        body = re.split(r"\s2\.\s", body)[0]  # first sense only
        body = re.sub(r"^(?:\S+\s+)?/[^/]{1,40}/\s*", "", body)  # "Tcl /tik*l/": pronunciation
        body = re.sub(r"^\(([^)]*)\)\s*", "", body)
        if len(body) < 20 or body.lower().startswith(("see", "compare", "abbreviation")):
            continue
        starts_article = re.match(r"(?i)(a|an|the)\s", body)
        a = "{} is {}".format(head, body[0].lower() + body[1:]) if starts_article else "{}: {}".format(head, body)
        q = rng.choice(["Tell me about {h}.", "What is {h}?", "What does {h} mean?", "Explain {h}.",
                        "What's {h}?"]).format(h=head)
        yield head, q, sentence_case(first_sentences(a))


# ---------------------------------------------------------------- assembly

def dialogue(turns, rng, src):
    msgs = []
    if rng.random() < 0.7:
        msgs.append({"role": "system", "content": SYSTEM_PROMPT})
    for q, a in turns:
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant", "content": a})
    return {"messages": msgs, "src": src}


def quote_dialogues(args, train, train_pairs, valid_pairs, heldout):
    """Repeat-and-quote dialogues (quoting.py): a share of the training set, and a separate
    validation set of them whose sentences and ordinary turns never occur in training."""
    qrng = random.Random(args.seed + 1)
    small = [(q, a) for qs, answers in smalltalk.INTENTS for q in qs for a in answers]
    pool_valid = quoting.sentence_pool([a for _, a in valid_pairs], heldout)
    keys_valid = {quoting.norm(p) for p in pool_valid}
    pool_train = [p for p in quoting.sentence_pool([a for _, a in train_pairs + small], heldout)
                  if quoting.norm(p) not in keys_valid]
    nouns = sorted({q.split()[-1].rstrip("?") for q, _ in train_pairs
                    if re.match(r"(What is|What's) an? [a-z]+\?$", q)} - heldout)
    words = sorted({w for p in pool_train for w in re.findall(r"[a-z]+", p)})
    quoter = quoting.Quoter(qrng, pool_train, train_pairs + small, nouns, words)
    share = args.quote_share
    n_train = round(len(train) * share / (1 - share))
    train_q = [dialogue(quoter.dialogue(), qrng, "quote") for _ in range(n_train)]
    vq = quoting.Quoter(qrng, pool_valid, valid_pairs, nouns, words)
    valid_q = [dialogue(vq.dialogue(), qrng, "quote") for _ in range(300)]
    return train_q, valid_q


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/train-data")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--heldout", type=int, default=60, help="headwords kept out of training")
    ap.add_argument("--quote-share", type=float, default=0.06,
                    help="share of the training dialogues that repeat or quote (quoting.py)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    pairs = {"wordnet": [], "foldoc": [], "jargon": []}
    for word, q, a in wordnet_dialogues(rng):
        pairs["wordnet"].append((word.lower(), q, a))
    for name in ("foldoc", "jargon"):
        for head, q, a in dict_dialogues(name, rng):
            pairs[name].append((head.lower(), q, a))

    heads = sorted({h for src in pairs.values() for h, _, _ in src if " " not in h and h.isalpha()})
    rng.shuffle(heads)
    heldout = set(heads[:args.heldout])

    train, valid, held = [], [], []
    train_pairs, valid_pairs = [], []  # (question, answer) on each side, for the quoting dialogues
    for src, items in pairs.items():
        rng.shuffle(items)
        i = 0
        while i < len(items):
            n = 1 if rng.random() < 0.8 else rng.randint(2, 3)  # some multi-turn dialogues
            group = items[i:i + n]
            i += n
            if any(h in heldout for h, _, _ in group):
                for h, q, a in group:
                    if h in heldout:
                        held.append({"messages": [{"role": "system", "content": SYSTEM_PROMPT},
                                                  {"role": "user", "content": q}], "reference": a, "src": src})
                continue
            d = dialogue([(q, a) for _, q, a in group], rng, src)
            to_valid = rng.random() < 0.02
            (valid if to_valid else train).append(d)
            (valid_pairs if to_valid else train_pairs).extend((q, a) for _, q, a in group)

    for turns in smalltalk.dialogues(rng):
        d = dialogue(turns, rng, "smalltalk")
        for _ in range(8):  # small talk is small: repeat it so the model learns it
            train.append(d)
        valid.append(d) if rng.random() < 0.05 else None

    # The quoting dialogues draw on their own generator, so the rest of the corpus, the validation
    # set and the held-out questions are exactly what they were without them.
    train, smalltalk_repeats = quoting.repeat_in_smalltalk(train, set(smalltalk.REPEAT_QUESTIONS))
    train_quotes, valid_quotes = quote_dialogues(args, train, train_pairs, valid_pairs, heldout)
    train += train_quotes

    rng.shuffle(train)
    for name, rows in (("train", train), ("valid", valid), ("heldout", held), ("valid-quote", valid_quotes)):
        with open(os.path.join(args.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = {k: len(v) for k, v in pairs.items()}
    print(json.dumps({"pairs": counts, "train": len(train), "valid": len(valid), "heldout": len(held),
                      "quote_train": len(train_quotes), "quote_valid": len(valid_quotes),
                      "smalltalk_repeats_fixed": smalltalk_repeats,
                      "train_chars": sum(len(m["content"]) for d in train for m in d["messages"])}))


if __name__ == "__main__":
    main()
