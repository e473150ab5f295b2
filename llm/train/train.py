#!/usr/bin/env python3
"""Train voxpipe's demo assistant (target) and its draft model on a CUDA machine; write GGUF files.

Input: the JSON-lines corpus from prepare.py. Steps, all seeded:
  1. a byte-level BPE tokenizer (Hugging Face `tokenizers`), ~8k tokens, ChatML special tokens;
  2. a Llama-architecture target and a small draft with the same tokenizer, plain PyTorch;
  3. GGUF export (llama arch, gpt2-style tokenizer with pre-tokenizer "gpt-2") in F32 or F16;
  4. held-out loss/perplexity and unedited sample answers to held-out questions, in report.json.

The model is written exactly as the engine (llm/engine) computes llama: RMSNorm, rotary embeddings
on adjacent pairs (llama.cpp's NORM mode, so no Q/K permutation on export), grouped-query
attention with consecutive query heads sharing a KV head, SwiGLU, tied input/output embeddings.
"""
import argparse
import contextlib
import json
import math
import os
import random
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

SHAPES = {
    # name: dim, layers, heads, kv_heads, ffn  (ffn and dim multiples of 32 so every matrix is Q8_0-able)
    "target": dict(dim=512, n_layers=8, n_heads=8, n_kv_heads=4, ffn=1408),
    "draft": dict(dim=192, n_layers=4, n_heads=4, n_kv_heads=2, ffn=512),
    # a memory-bound benchmark target for speculative decoding (models/README.md, "bench pair"); not shipped
    "bench": dict(dim=768, n_layers=8, n_heads=12, n_kv_heads=4, ffn=2048),
}


# ------------------------------------------------------------------------------------------ data

def render(messages, add_generation_prompt=False):
    """ChatML, byte for byte what llm/engine/chat renders."""
    out = "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]) for m in messages)
    return out + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def load_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def train_tokenizer(texts, vocab_size, seed):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    random.Random(seed).shuffle(texts)
    tok.train_from_iterator(texts, trainer)
    return tok


def load_tokenizer_file(path):
    """A tokenizer to reuse instead of training one: the vocabulary and merges of a GGUF model (the demo's, so a
    new model shares its tokenizer and its draft shape) or a Hugging Face tokenizer.json."""
    if path.endswith(".gguf"):
        from gguf_read import Reader, load_tokenizer
        return load_tokenizer(Reader(path))
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


def encode_dialogues(tok, dialogues):
    """Token ids and a loss mask (1 on assistant answers and their <|im_end|>)."""
    ids, mask = [], []
    im_start, im_end = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")
    for d in dialogues:
        for m in d["messages"]:
            head = tok.encode("%s\n" % m["role"]).ids
            body = tok.encode(m["content"]).ids
            tail = tok.encode("\n").ids
            learn = 1 if m["role"] == "assistant" else 0
            ids += [im_start] + head + body + [im_end] + tail
            mask += [0] * (1 + len(head)) + [learn] * (len(body) + 1) + [0] * len(tail)
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.bool)


# ------------------------------------------------------------------------------------------ model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(head_dim, seq_len, base, device):
    inv = base ** (-torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    ang = torch.outer(torch.arange(seq_len, device=device).float(), inv)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    # x: (B, H, T, D); rotate adjacent pairs (x[2i], x[2i+1]) — llama.cpp's NORM mode.
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    c, s = cos[: x.shape[2]], sin[: x.shape[2]]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
    return out.type_as(x)


class Block(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, ffn, eps, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)  # training only; inference is unchanged
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.attn_norm = RMSNorm(dim, eps)
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim, eps)
        self.w_gate = nn.Linear(dim, ffn, bias=False)
        self.w_up = nn.Linear(dim, ffn, bias=False)
        self.w_down = nn.Linear(ffn, dim, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.wo(a.transpose(1, 2).reshape(B, T, -1)))
        h = self.ffn_norm(x)
        return x + self.drop(self.w_down(F.silu(self.w_gate(h)) * self.w_up(h)))


class Llama(nn.Module):
    def __init__(self, vocab, dim, n_layers, n_heads, n_kv_heads, ffn, ctx, eps=1e-5, rope_base=10000.0, dropout=0.0):
        super().__init__()
        self.cfg = dict(vocab=vocab, dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
                        ffn=ffn, ctx=ctx, eps=eps, rope_base=rope_base)
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, n_heads, n_kv_heads, ffn, eps, dropout) for _ in range(n_layers))
        self.norm = RMSNorm(dim, eps)
        self.rope = None
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("wo.weight", "w_down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        if self.rope is None or self.rope[0].device != ids.device:
            self.rope = rope_tables(self.cfg["dim"] // self.cfg["n_heads"], self.cfg["ctx"], self.cfg["rope_base"],
                                    ids.device)
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x, *self.rope)
        return F.linear(self.norm(x), self.embed.weight)  # tied output


# ------------------------------------------------------------------------------------------ training

def batches(ids, mask, seq, batch, gen):
    n = (len(ids) - 1) // seq
    order = torch.randperm(n, generator=gen)
    for i in range(0, n - batch + 1, batch):
        starts = order[i:i + batch] * seq
        idx = starts[:, None] + torch.arange(seq + 1)[None, :]
        yield ids[idx[:, :-1]], ids[idx[:, 1:]], mask[idx[:, 1:]]


def masked_loss(model, x, y, m):
    logits = model(x)
    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
    m = m.reshape(-1).float()
    return (loss * m).sum() / m.sum().clamp(min=1)


def autocast(device):
    """bf16 autocast on a GPU; plain float32 elsewhere (CPU runs are for smoke tests only)."""
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model, ids, mask, seq, device):
    model.eval()
    tot, cnt = 0.0, 0.0
    n = (len(ids) - 1) // seq
    for i in range(0, n, 64):
        idx = (torch.arange(i, min(n, i + 64)) * seq)[:, None] + torch.arange(seq + 1)[None, :]
        x, y, m = ids[idx[:, :-1]].to(device), ids[idx[:, 1:]].to(device), mask[idx[:, 1:]].to(device)
        with autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        mf = m.reshape(-1).float()
        tot += (loss * mf).sum().item()
        cnt += mf.sum().item()
    model.train()
    return tot / max(cnt, 1)


def train(name, model, data, valid, args, device, log):
    seq, batch = args.seq, args.batch
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if str(device).startswith("cuda") else {}))
    # every shape but the draft is a target (--target-steps/--target-seconds)
    budget = args.draft_seconds if name == "draft" else args.target_seconds
    max_steps = args.draft_steps if name == "draft" else args.target_steps
    gen = torch.Generator().manual_seed(args.seed)
    start, step, best = time.time(), 0, (float("inf"), None, 0)
    warmup = 200
    est_steps = None
    stale = 0  # evaluations since the best one (--patience)
    while time.time() - start < budget:
        for x, y, m in batches(*data, seq, batch, gen):
            elapsed = time.time() - start
            if elapsed >= budget or (max_steps and step >= max_steps):
                budget = 0
                break
            if step == 50:
                est_steps = max_steps or int(budget / (elapsed / 50))
            total = est_steps or 10 ** 9
            lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total))))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y, m = x.to(device, non_blocking=True), y.to(device, non_blocking=True), m.to(device, non_blocking=True)
            with autocast(device):
                loss = masked_loss(model, x, y, m)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                v = evaluate(model, *valid, seq, device)
                log("%s step %d %.0fs lr %.2e train %.3f valid %.3f" % (name, step, elapsed, lr, loss.item(), v))
                if v < best[0]:
                    best = (v, {k: t.detach().clone() for k, t in model.state_dict().items()}, step)
                    stale = 0
                else:
                    stale += 1
                if args.patience and stale >= args.patience:
                    log("%s: no better validation loss in %d evaluations, stopping at step %d" % (name, stale, step))
                    budget = 0
                    break
    v = evaluate(model, *valid, seq, device)
    if v < best[0]:
        best = (v, {k: t.detach().clone() for k, t in model.state_dict().items()}, step)
    model.load_state_dict(best[1])
    log("%s done: %d steps in %.0fs, best valid loss %.4f (ppl %.2f) at step %d" %
        (name, step, time.time() - start, best[0], math.exp(best[0]), best[2]))
    return dict(steps=step, seconds=round(time.time() - start, 1), valid_loss=best[0], valid_ppl=math.exp(best[0]),
                best_step=best[2])


@torch.no_grad()
def greedy_answer(model, tok, messages, device, max_new=60):
    model.eval()
    ids = tok.encode(render(messages, add_generation_prompt=True)).ids
    end = tok.token_to_id("<|im_end|>")
    out = []
    for _ in range(max_new):
        x = torch.tensor([ids + out], device=device)
        nxt = int(model(x)[0, -1].float().argmax())
        if nxt == end:
            break
        out.append(nxt)
    return tok.decode(out)


def tool_check(model, tok, dialogues, device, log, limit=120):
    """Greedy answers to tools.py's validation requests (frames seen in training, new slots): the share whose first
    answer is exactly the expected call (or, for the questions that only mention the words, has no call)."""
    ok = calls = n = 0
    bad = []
    for d in dialogues[:limit]:
        msgs = d["messages"]
        i = next(k for k in range(len(msgs)) if msgs[k]["role"] == "assistant" and
                 msgs[k - 1]["content"].find("<tool_response>") < 0 and
                 (msgs[k]["content"].startswith("<tool_call>") or d["src"] == "tools-negative"))
        want = msgs[i]["content"]
        got = greedy_answer(model, tok, msgs[:i], device, max_new=48)
        n += 1
        calls += "<tool_call>" in got
        if (got == want) if want.startswith("<tool_call>") else ("<tool_call>" not in got):
            ok += 1
        elif len(bad) < 8:
            bad.append({"prompt": msgs[i - 1]["content"][-80:], "want": want, "got": got})
    log("tool check: %d/%d right, %d answers with a call" % (ok, n, calls))
    return {"right": ok, "of": n, "with_call": calls, "wrong": bad}


# ------------------------------------------------------------------------------------------ GGUF

GGUF_U32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR, GGUF_I32 = 4, 6, 7, 8, 9, 5


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, typ, value):
    out = gguf_str(key) + struct.pack("<I", typ)
    if typ == GGUF_U32:
        return out + struct.pack("<I", value)
    if typ == GGUF_I32:
        return out + struct.pack("<i", value)
    if typ == GGUF_F32:
        return out + struct.pack("<f", value)
    if typ == GGUF_BOOL:
        return out + struct.pack("<B", 1 if value else 0)
    if typ == GGUF_STR:
        return out + gguf_str(value)
    elem, items = value
    out += struct.pack("<IQ", elem, len(items))
    if elem == GGUF_STR:
        return out + b"".join(gguf_str(s) for s in items)
    fmt = {GGUF_I32: "<i", GGUF_F32: "<f"}[elem]
    return out + b"".join(struct.pack(fmt, v) for v in items)


TYPE_F32, TYPE_F16, TYPE_Q8_0 = 0, 1, 8
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7}  # llama.cpp's general.file_type


def q8_0_bytes(t):
    """Q8_0 blocks of a float32 matrix (rows of a multiple of 32), as ggml's quantize_row_q8_0_ref makes them:
    per 32 values a float16 scale d = amax / 127, then 32 int8 values round(x / d), halves away from zero."""
    import numpy as np
    x = t.numpy().astype(np.float32).reshape(-1, 32)
    d = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    v = (x * inv).astype(np.float64)  # the float32 product, rounded in float64 like C's roundf
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127).astype(np.int8)
    out = np.empty((x.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def write_gguf(path, model, tok, name, dtype, tool_format=""):
    cfg = model.cfg
    vocab = tok.get_vocab()
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    specials = {tok.token_to_id(s) for s in SPECIALS}
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    kvs = [
        ("general.architecture", GGUF_STR, "llama"),
        ("general.name", GGUF_STR, name),
        ("general.file_type", GGUF_U32, FILE_TYPE[dtype]),
        ("llama.context_length", GGUF_U32, cfg["ctx"]),
        ("llama.embedding_length", GGUF_U32, cfg["dim"]),
        ("llama.block_count", GGUF_U32, cfg["n_layers"]),
        ("llama.feed_forward_length", GGUF_U32, cfg["ffn"]),
        ("llama.attention.head_count", GGUF_U32, cfg["n_heads"]),
        ("llama.attention.head_count_kv", GGUF_U32, cfg["n_kv_heads"]),
        ("llama.rope.dimension_count", GGUF_U32, cfg["dim"] // cfg["n_heads"]),
        ("llama.rope.freq_base", GGUF_F32, cfg["rope_base"]),
        ("llama.attention.layer_norm_rms_epsilon", GGUF_F32, cfg["eps"]),
        ("llama.vocab_size", GGUF_U32, cfg["vocab"]),
        ("tokenizer.ggml.model", GGUF_STR, "gpt2"),
        ("tokenizer.ggml.pre", GGUF_STR, "gpt-2"),
        ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, tokens)),
        ("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, [3 if i in specials else 1 for i in range(len(tokens))])),
        ("tokenizer.ggml.merges", GGUF_ARR, (GGUF_STR, merges)),
        ("tokenizer.ggml.bos_token_id", GGUF_U32, tok.token_to_id("<|endoftext|>")),
        ("tokenizer.ggml.eos_token_id", GGUF_U32, tok.token_to_id("<|im_end|>")),
        ("tokenizer.ggml.padding_token_id", GGUF_U32, tok.token_to_id("<|endoftext|>")),
        ("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
        ("tokenizer.ggml.add_eos_token", GGUF_BOOL, False),
        ("tokenizer.chat_template", GGUF_STR, CHATML_TEMPLATE),
    ]
    if dtype == "q8_0":
        kvs.append(("general.quantization_version", GGUF_U32, 2))
    if tool_format:
        # how llm/engine/chat lists tools for this model (tools.py: the compact line it was trained on)
        kvs.append(("voxpipe.tool_format", GGUF_STR, tool_format))
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    tensors = [("token_embd.weight", sd["embed.weight"]), ("output_norm.weight", sd["norm.weight"])]
    names = dict(attn_norm="attn_norm.weight", wq="attn_q.weight", wk="attn_k.weight", wv="attn_v.weight",
                 wo="attn_output.weight", ffn_norm="ffn_norm.weight", w_gate="ffn_gate.weight",
                 w_up="ffn_up.weight", w_down="ffn_down.weight")
    for i in range(cfg["n_layers"]):
        for mod, gg in names.items():
            tensors.append(("blk.%d.%s" % (i, gg), sd["blocks.%d.%s.weight" % (i, mod)]))
    align = 32
    infos, blobs, offset = b"", [], 0
    for tname, t in tensors:
        # norms stay F32, as llama.cpp does (and Q8_0 needs rows of a multiple of 32)
        if t.dim() == 1 or dtype == "f32" or (dtype == "q8_0" and t.shape[-1] % 32):
            typ, data = TYPE_F32, t.numpy().astype("<f4").tobytes()
        elif dtype == "f16":
            typ, data = TYPE_F16, t.numpy().astype("<f2").tobytes()
        else:
            typ, data = TYPE_Q8_0, q8_0_bytes(t)
        dims = list(reversed(t.shape))  # ggml order: ne0 (contiguous) first
        infos += gguf_str(tname) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", typ, offset)
        pad = (-len(data)) % align
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(gguf_kv(*kv) for kv in kvs) + infos
    header += b"\0" * ((-len(header)) % align)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)
    return os.path.getsize(path)


def same_tokenizer(a, b):
    """Whether two GGUF files carry the same tokenizer (vocabulary, token types, merges, special ids)."""
    from gguf_read import Reader
    keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.pre")
    ma, mb = Reader(a).meta, Reader(b).meta
    return all(ma.get(k) == mb.get(k) for k in keys)


# ------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="build/train-data")
    ap.add_argument("--out", default="build/models")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--target-seconds", type=float, default=240)
    ap.add_argument("--draft-seconds", type=float, default=90)
    ap.add_argument("--target-steps", type=int, default=0, help="stop after this many steps (0: time budget only)")
    ap.add_argument("--draft-steps", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--dtype", choices=["f32", "f16", "q8_0"], default="f32", help="GGUF weight type of the export")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--models", default="target,draft",
                    help="which models (SHAPES names) to train, comma-separated (the shipped draft is distilled: "
                    "distill.py)")
    ap.add_argument("--tokenizer", help="reuse this tokenizer instead of training one: a GGUF model's (e.g. "
                    "models/voxpipe-demo-q8_0.gguf) or a tokenizer.json")
    ap.add_argument("--eval-every", type=int, default=250, help="validation loss every this many steps")
    ap.add_argument("--patience", type=int, default=0,
                    help="stop after this many evaluations without a better validation loss (0: never)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only for smoke tests")
    ap.add_argument("--tool-format", default="", help="voxpipe.tool_format of the export (compact: tools.py's "
                    "tool line; empty: the template's own format)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = args.device
    report = {"args": vars(args), "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else device}
    logf = open(os.path.join(args.out, "train.log"), "w")

    def log(msg):
        line = "[%6.1fs] %s" % (time.time() - t0, msg)
        print(line, flush=True)
        logf.write(line + "\n")

    t0 = time.time()
    train_d = load_jsonl(os.path.join(args.data, "train.jsonl"))
    valid_d = load_jsonl(os.path.join(args.data, "valid.jsonl"))
    held = load_jsonl(os.path.join(args.data, "heldout.jsonl"))
    tv = os.path.join(args.data, "valid-tools.jsonl")  # tools.py's validation rounds, when the corpus has them
    tool_valid = load_jsonl(tv) if os.path.exists(tv) else []
    if args.tokenizer:
        tok = load_tokenizer_file(args.tokenizer)
        log("tokenizer: %d tokens, from %s" % (tok.get_vocab_size(), args.tokenizer))
    else:
        tok = train_tokenizer([render(d["messages"]) for d in train_d], args.vocab, args.seed)
        log("tokenizer: %d tokens" % tok.get_vocab_size())
    tok.save(os.path.join(args.out, "tokenizer.json"))
    data = encode_dialogues(tok, train_d)
    valid = encode_dialogues(tok, valid_d)
    log("train tokens %d (%d learned), valid tokens %d" % (len(data[0]), int(data[1].sum()), len(valid[0])))
    report["train_tokens"], report["valid_tokens"] = len(data[0]), len(valid[0])

    for name in args.models.split(","):
        torch.manual_seed(args.seed)
        model = Llama(tok.get_vocab_size(), ctx=args.ctx, dropout=args.dropout, **SHAPES[name]).to(device)
        n_params = sum(p.numel() for p in model.parameters())
        log("%s: %.2fM parameters %s" % (name, n_params / 1e6, SHAPES[name]))
        stats = train(name, model, data, valid, args, device, log)
        stats["params"] = n_params
        stats["shape"] = SHAPES[name]
        path = os.path.join(args.out, "voxpipe-%s-%s.gguf" % (name, args.dtype))
        size = write_gguf(path, model, tok, "voxpipe-demo-" + name if name in ("target", "draft") else "voxpipe-" + name,
                          args.dtype, args.tool_format)
        stats["gguf_bytes"] = size
        if args.tokenizer and args.tokenizer.endswith(".gguf"):
            stats["same_tokenizer"] = same_tokenizer(path, args.tokenizer)
            log("%s: tokenizer metadata %s %s" % (name, "identical to" if stats["same_tokenizer"] else "DIFFERS from",
                                                  args.tokenizer))
        if name != "draft":
            stats["samples"] = [{"question": h["messages"][-1]["content"], "reference": h["reference"],
                                 "answer": greedy_answer(model, tok, h["messages"], device)} for h in held[:30]]
            if tool_valid:
                stats["tool_calls"] = tool_check(model, tok, tool_valid[:100] + tool_valid[-20:], device, log)
        report[name] = stats
        log("%s exported (%d bytes)" % (name, size))
        del model
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log("all done")


if __name__ == "__main__":
    main()
