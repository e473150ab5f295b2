#!/usr/bin/env python3
"""Ground the demo corpus in the knowledge base: put the passages the server would retrieve before the question.

Two steps around `voxpipe knowledge query --json --augment`, so every grounded prompt is byte for byte the
user message the server sends (the template, the reranker, min_score and the token budget are the Go code's):

  grounding.py questions --data build/train-data --work build/grounding
      picks the dialogues to ground (seeded) and writes their last questions to WORK/questions.txt;
  voxpipe knowledge query --json --augment --file WORK/questions.txt > WORK/answers.jsonl
  grounding.py apply --data build/train-data --work build/grounding --out build/train-data-grounded
      writes train/valid/heldout.jsonl with those questions replaced by their augmented form.

What is grounded: a share (--share, 0.6) of the dictionary dialogues (WordNet, FOLDOC, Jargon), whose answers
paraphrase or quote their headword's passage; a share (--smalltalk-share) of the small talk, which keeps its
answers whatever a word of it retrieved ("how are you today" finds "today"); and a few dialogues of each kind
(--irrelevant-share) given another question's passages, which the answer must ignore. A share of the grounded
questions (--asr-share) is first put in the recogniser's form (lower case, no punctuation), as voice turns
arrive. Only the last user message of a dialogue is augmented, as the server does. Standard library only.
"""
import argparse
import json
import os
import random
import re

DICTIONARY_SOURCES = {"wordnet", "foldoc", "jargon"}
FILES = ("train", "valid", "heldout")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def asr_form(q):
    """What pocketsphinx would hand over: lower case, words and apostrophes only."""
    q = re.sub(r"[^a-z0-9' ]+", " ", q.lower())
    return re.sub(r"\s+", " ", q).strip()


def last_user(d):
    for i in range(len(d["messages"]) - 1, -1, -1):
        if d["messages"][i]["role"] == "user":
            return i
    return -1


def plan(args):
    """Decide, per dialogue, whether to ground it and in which form; deterministic for a seed."""
    rng = random.Random(args.seed)
    rows, questions = {}, []
    for name in FILES:
        data = load(os.path.join(args.data, name + ".jsonl"))
        out = []
        for d in data:
            src = d.get("src", "")
            share = {"smalltalk": args.smalltalk_share}.get(src, args.share if src in DICTIONARY_SOURCES else 0)
            if name == "heldout":
                share = 1.0 if src in DICTIONARY_SOURCES else 0
            i = last_user(d)
            r = rng.random()
            if i < 0 or r >= share:
                out.append(None)
                continue
            q = d["messages"][i]["content"]
            if name != "heldout" and rng.random() < args.asr_share:
                q = asr_form(q)
            out.append(q)
            questions.append(q)
        rows[name] = out
    return rows, questions


def cmd_questions(args):
    rows, questions = plan(args)
    os.makedirs(args.work, exist_ok=True)
    uniq = sorted(set(q for q in questions if q))
    with open(os.path.join(args.work, "questions.txt"), "w", encoding="utf-8") as f:
        for q in uniq:
            f.write(q.replace("\n", " ") + "\n")
    print(json.dumps({"grounding_questions": len(uniq), "rows": {k: sum(1 for q in v if q) for k, v in rows.items()}}))


def cmd_apply(args):
    rows, _ = plan(args)
    found = {}
    with open(os.path.join(args.work, "answers.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            found[r["question"]] = r
    blocks = sorted({r["augmented"][:r["augmented"].index("\nQuestion: ")]
                     for r in found.values() if r["passages"]})
    if not blocks:
        raise SystemExit("grounding: no question found a passage; is the knowledge index right?")
    rng = random.Random(args.seed + 7)
    os.makedirs(args.out, exist_ok=True)
    stats = {}
    for name in FILES:
        data = load(os.path.join(args.data, name + ".jsonl"))
        n = {"grounded": 0, "asr": 0, "no_passage": 0, "irrelevant": 0}
        with open(os.path.join(args.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for d, q in zip(data, rows[name]):
                i = last_user(d)
                src = d.get("src", "")
                if q is not None:
                    r = found.get(q)
                    if r is None:
                        raise SystemExit("grounding: %r has no lookup in answers.jsonl (run the query step again)" % q)
                    if r["passages"]:
                        n["asr"] += q != d["messages"][i]["content"]
                        d["messages"][i]["content"] = r["augmented"]
                        d["grounded"] = True
                        n["grounded"] += 1
                    else:
                        n["no_passage"] += 1
                elif name != "heldout" and i >= 0 and (src in DICTIONARY_SOURCES or src == "smalltalk") and \
                        rng.random() < args.irrelevant_share * (3 if src == "smalltalk" else 1):
                    q0 = d["messages"][i]["content"]
                    words = set(re.findall(r"[a-z]+", q0.lower()))
                    for _ in range(8):
                        b = rng.choice(blocks)
                        titles = re.findall(r"^([^:\n]+):", b[b.index("\n") + 1:], re.M)
                        if not any(set(re.findall(r"[a-z]+", t.lower())) & words for t in titles):
                            d["messages"][i]["content"] = b + "\nQuestion: " + q0
                            d["irrelevant"] = True
                            n["irrelevant"] += 1
                            break
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        stats[name] = n
    print(json.dumps(stats))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["questions", "apply"])
    ap.add_argument("--data", default="build/train-data", help="prepare.py's output")
    ap.add_argument("--work", default="build/grounding", help="questions.txt and answers.jsonl")
    ap.add_argument("--out", default="build/train-data-grounded")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--share", type=float, default=0.6, help="share of dictionary dialogues grounded")
    ap.add_argument("--smalltalk-share", type=float, default=0.5, help="share of small talk given what it retrieves")
    ap.add_argument("--asr-share", type=float, default=0.3, help="share of grounded questions in the recogniser's form")
    ap.add_argument("--irrelevant-share", type=float, default=0.04,
                    help="share of the other dictionary dialogues given another question's passages (x3 for small talk)")
    args = ap.parse_args()
    {"questions": cmd_questions, "apply": cmd_apply}[args.step](args)


if __name__ == "__main__":
    main()
