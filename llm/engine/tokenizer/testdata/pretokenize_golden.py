#!/usr/bin/env python3
"""Writes pretokenize.json: words of llama.cpp's pre-tokenizer regexes, computed
with the real regexes (python `regex` module, which has lookahead), for the Go
hand-written splitters to match. Run from this directory: python3 pretokenize_golden.py"""
import json, random, regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
PRE = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt2": [GPT2],
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "smollm": [r"\p{N}", GPT2],
}

def split(exprs, text):
    segs = [text]
    for e in exprs:
        out = []
        for s in segs:
            last = 0
            for m in regex.finditer(e, s):
                if m.start() > last:
                    out.append(s[last:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                last = m.end()
            if last < len(s):
                out.append(s[last:])
        segs = out
    return segs

FIXED = [
    "Hello world", "Hello, world! How's it going? I'll be there.", "I'M HERE, YOU'RE THERE, WE'LL SEE",
    "  leading and trailing  ", "a  b   c\td\n\ne \n f", "line1\r\nline2\n\n\nline3", "numbers 1 12 123 1234 12345 1234567",
    "price: $1,234.56 + 7% <tag> a=b ^x ~y |z", "'quoted' 'sup 'S 'Ll", "tabs\t\tand\t spaces \t", "trailing newline\n",
    "unicode: café naïve 日本語のテキスト 한국어 Ελληνικά", "emoji 😀😀 ok 👍🏽!", "mixed123abc 456def", "x²³ ٣٤٥ Ⅻ",
    "...!!!???", " . , ;", "\n", " ", "", "a\u00a0b\u3000c", "end.   ", "a\n  b", "don't can't won't",
    "<|im_start|>user", "e\u0301t\u00e9", "3.14159", "1,000,000",
]
POOL = list("abcXYZ éüñ日本한Ωж") + list("0123456789²٣Ⅻ") + [" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000"] + list(".,!?'\"-$+<=>^~|()[]{}#@&*_/\\:;") + ["'s", "'T", "'re", "'LL", "😀", "\u0301"]

def main():
    rnd = random.Random(7)
    texts = FIXED + ["".join(rnd.choice(POOL) for _ in range(rnd.randint(1, 40))) for _ in range(120)]
    cases = [{"pre": p, "text": t, "words": split(e, t)} for p, e in PRE.items() for t in texts]
    with open("pretokenize.json", "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n")

main()
