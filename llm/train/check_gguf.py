#!/usr/bin/env python3
"""Greedy answers from a GGUF model through PyTorch, to compare with the engine's.

    python3 llm/train/check_gguf.py --model models/voxpipe-demo-q8_0.gguf --prompt "What is a compiler?"
    bin/voxpipe llm run --model models/voxpipe-demo-q8_0.gguf --system "$SYSTEM" --prompt "..." --temp 0 --max-tokens 60

The two must print the same text: that checks gguf_read.py (and the engine). Runs on a CPU; uses
Hugging Face `tokenizers` when installed, else a plain byte-level BPE encoder written below.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_read import load_llama  # noqa: E402
from train import SPECIALS, render  # noqa: E402

SYSTEM_PROMPT = "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def byte_alphabet():
    """GPT-2's printable stand-in for each byte, as Hugging Face's ByteLevel uses."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


class PlainBPE:
    """Byte-level BPE encoding from the GGUF vocabulary and merges (for machines without `tokenizers`)."""

    def __init__(self, meta):
        import regex
        self.pattern = regex.compile(GPT2_PATTERN)
        self.ids = {t: i for i, t in enumerate(meta["tokenizer.ggml.tokens"])}
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(meta["tokenizer.ggml.merges"])}
        self.alphabet = byte_alphabet()
        self.bytes_of = {c: b for b, c in self.alphabet.items()}
        self.tokens = meta["tokenizer.ggml.tokens"]

    def _word(self, word):
        parts = [self.alphabet[b] for b in word.encode("utf-8")]
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [self.ids[p] for p in parts]

    def encode(self, text):
        out, rest = [], text
        while rest:
            cut = min(((rest.find(s), s) for s in SPECIALS if s in rest), default=(len(rest), None))
            for word in self.pattern.findall(rest[:cut[0]]):
                out += self._word(word)
            if cut[1] is None:
                break
            out.append(self.ids[cut[1]])
            rest = rest[cut[0] + len(cut[1]):]
        return out

    def decode(self, ids):
        return bytes(self.bytes_of[c] for i in ids for c in self.tokens[i]).decode("utf-8", "replace")


def attention_fallback(q, k, v, is_causal=False):
    """Causal attention for PyTorch older than 2.0 (no scaled_dot_product_attention)."""
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    t = s.shape[-1]
    s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


@torch.no_grad()
def greedy(model, end, prompt_ids, max_new):
    out = []
    for _ in range(max_new):
        nxt = int(model(torch.tensor([prompt_ids + out]))[0, -1].argmax())
        if nxt == end:
            break
        out.append(nxt)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", action="append", required=True)
    ap.add_argument("--system", default=SYSTEM_PROMPT)
    ap.add_argument("--max-tokens", type=int, default=60)
    ap.add_argument("--tokenizer-check", metavar="JSONL", help="also encode every message of this corpus file "
                    "with both Hugging Face's tokenizer (rebuilt from the GGUF) and the plain encoder; count differences")
    args = ap.parse_args()
    if not hasattr(F, "scaled_dot_product_attention"):
        F.scaled_dot_product_attention = attention_fallback
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, r = load_llama(args.model)
    try:
        from gguf_read import load_tokenizer
        tok = load_tokenizer(r)
        encode, decode = (lambda s: tok.encode(s).ids), tok.decode
    except ImportError:
        bpe = PlainBPE(r.meta)
        encode, decode = bpe.encode, bpe.decode
    if args.tokenizer_check:
        bpe = PlainBPE(r.meta)
        texts = [m["content"] for line in open(args.tokenizer_check, encoding="utf-8")
                 for m in json.loads(line)["messages"]]
        differ = sum(encode(t) != bpe.encode(t) for t in texts)
        print(json.dumps({"tokenizer_check": args.tokenizer_check, "texts": len(texts), "differ": differ}), flush=True)
    end = r.meta["tokenizer.ggml.eos_token_id"]
    for p in args.prompt:
        msgs = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": p}]
        ids = greedy(model, end, encode(render(msgs, add_generation_prompt=True)), args.max_tokens)
        print(json.dumps({"prompt": p, "answer": decode(ids), "tokens": len(ids)}), flush=True)


if __name__ == "__main__":
    main()
