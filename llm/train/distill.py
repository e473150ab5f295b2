#!/usr/bin/env python3
"""Distil a draft model from the demo target for speculative decoding, on a CUDA machine.

A draft is only useful where it guesses the target's next greedy token, so it is trained on what
the target itself does rather than on the corpus:
  1. the target (a GGUF file, read by gguf_read.py) answers every training and validation question
     greedily, turn after turn, its own answers kept in the history — the text speculative decoding
     verifies at serving time (batched, left-padded, with a KV cache);
  2. the draft learns the target's full next-token distribution (KL divergence, soft labels computed
     on the fly by the target) on the answer tokens of both the target's dialogues and the corpus's;
  3. the checkpoint whose greedy agreement with the target is highest on the target's own
     validation answers is exported as GGUF (F16 or F32) for `voxpipe llm quantize`.
Everything is seeded; report.json holds the agreement figures and the target's sample answers.
"""
import argparse
import contextlib
import gzip
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_read import load_llama, load_tokenizer  # noqa: E402
from train import Llama, SHAPES, batches, encode_dialogues, load_jsonl, rope_tables, write_gguf  # noqa: E402

# Questions `voxpipe llm bench` asks (cmd/voxpipe/llm.go); their greedy answers go in the report so the
# engine's can be compared with PyTorch's.
BENCH_QUESTIONS = ["What is a compiler?", "What does the word harbour mean?", "What is an operating system kernel?",
                   "What is a database?", "What does ephemeral mean?", "What is a network protocol?",
                   "What is an algorithm?", "What does the word lantern mean?"]
SYSTEM_PROMPT = "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."


# ------------------------------------------------------------------------------------------ generation

def rotate(x, cos, sin):
    """Rotary embedding on adjacent pairs with per-row positions: cos/sin are (B, 1, T, D/2)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def cached_step(model, ids, pos, cache, slot, mask, tables):
    """Forward ids (B, T) at positions pos (B, T) into cache slots [slot, slot+T); logits of the last column.

    mask (B, 1, T, slot+T) says which cached keys each query sees. Query heads are grouped under
    their KV head (consecutive query heads share one), so K and V are never copied per query head.
    """
    cfg = model.cfg
    B, T = ids.shape
    hd, kv = cfg["dim"] // cfg["n_heads"], cfg["n_kv_heads"]
    rep = cfg["n_heads"] // kv
    cos, sin = tables[0][pos][:, None], tables[1][pos][:, None]
    group_mask = mask.repeat(1, 1, rep, 1)  # rows follow q's (rep, T) order below
    x = model.embed(ids)
    for layer, b in enumerate(model.blocks):
        h = b.attn_norm(x)
        q = rotate(b.wq(h).view(B, T, -1, hd).transpose(1, 2), cos, sin)
        k = rotate(b.wk(h).view(B, T, kv, hd).transpose(1, 2), cos, sin)
        ck, cv = cache[layer]
        ck[:, :, slot:slot + T] = k
        cv[:, :, slot:slot + T] = b.wv(h).view(B, T, kv, hd).transpose(1, 2)
        q = q.reshape(B, kv, rep * T, hd)
        a = F.scaled_dot_product_attention(q, ck[:, :, :slot + T], cv[:, :, :slot + T], attn_mask=group_mask)
        a = a.reshape(B, kv * rep, T, hd).transpose(1, 2).reshape(B, T, -1)
        x = x + b.wo(a)
        h = b.ffn_norm(x)
        x = x + b.w_down(F.silu(b.w_gate(h)) * b.w_up(h))
    return F.linear(model.norm(x[:, -1]), model.embed.weight)


@torch.no_grad()
def generate(model, prompts, end_id, max_new, batch, device):
    """Greedy continuations (token lists, without the end token) of every prompt; prompts are sorted by
    length and left-padded in batches, so a batch wastes little on padding."""
    cfg = model.cfg
    hd, kv = cfg["dim"] // cfg["n_heads"], cfg["n_kv_heads"]
    tables = rope_tables(hd, cfg["ctx"], cfg["rope_base"], device)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out = [None] * len(prompts)
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        B, L = len(idx), max(len(prompts[i]) for i in idx)
        new = min(max_new, cfg["ctx"] - L)
        pad = torch.tensor([L - len(prompts[i]) for i in idx], device=device)
        ids = torch.zeros(B, L, dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, L - len(prompts[i]):] = torch.tensor(prompts[i])
        ids = ids.to(device)
        cols = torch.arange(L + new, device=device)
        valid = cols[None, :] >= pad[:, None]  # (B, L+new): padding is never a key
        pos = (cols[None, :L] - pad[:, None]).clamp(min=0)
        causal = torch.ones(L, L, dtype=torch.bool, device=device).tril()
        # a padding row sees itself so its softmax is defined; nothing reads its output
        prefill = (causal[None] & valid[:, None, :L]) | torch.eye(L, dtype=torch.bool, device=device)[None]
        cache = [tuple(torch.empty(B, kv, L + new, hd, device=device) for _ in range(2)) for _ in model.blocks]
        nxt = cached_step(model, ids, pos, cache, 0, prefill[:, None], tables).argmax(-1)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        toks = []
        for t in range(new):
            toks.append(nxt)
            done |= nxt == end_id
            if t == new - 1 or bool(done.all()):
                break
            step_pos = (L - pad + t)[:, None]
            logits = cached_step(model, nxt[:, None], step_pos, cache, L + t, valid[:, None, None, :L + t + 1], tables)
            nxt = logits.argmax(-1)
        toks = torch.stack(toks, 1).tolist()
        for row, i in enumerate(idx):
            seq = toks[row]
            out[i] = seq[:seq.index(end_id) + 1] if end_id in seq else seq
        del cache
    return out


def target_dialogues(model, tok, dialogues, args, device, log):
    """Every dialogue re-answered by the target, turn by turn: token ids and the answer mask, in
    train.py's encoding (loss on answers and their <|im_end|>), plus the decoded texts."""
    im_start, im_end = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")
    newline = tok.encode("\n").ids
    heads = {r: tok.encode("%s\n" % r).ids for r in ("system", "user", "assistant")}
    seqs = [[] for _ in dialogues]
    masks = [[] for _ in dialogues]
    texts = [[] for _ in dialogues]
    cursor = [0] * len(dialogues)
    live = list(range(len(dialogues)))
    turn = 0
    while live:
        pending = []
        for d in live:
            msgs = dialogues[d]["messages"]
            while cursor[d] < len(msgs) and msgs[cursor[d]]["role"] != "assistant":
                m = msgs[cursor[d]]
                part = [im_start] + heads[m["role"]] + tok.encode(m["content"]).ids + [im_end] + newline
                seqs[d] += part
                masks[d] += [0] * len(part)
                texts[d].append(m)
                cursor[d] += 1
            if cursor[d] < len(msgs):
                seqs[d] += [im_start] + heads["assistant"]
                masks[d] += [0] * (1 + len(heads["assistant"]))
                pending.append(d)
        if not pending:
            break
        t0 = time.time()
        answers = generate(model, [seqs[d] for d in pending], im_end, args.max_new, args.gen_batch, device)
        live = []
        cut = 0
        for d, ans in zip(pending, answers):
            finished = bool(ans) and ans[-1] == im_end
            body = ans[:-1] if finished else ans
            seqs[d] += body + [im_end] + newline
            masks[d] += [1] * len(body) + [1 if finished else 0] + [0] * len(newline)
            texts[d].append({"role": "assistant", "content": tok.decode(body)})
            cursor[d] += 1
            if finished:  # a cut-off answer ends the dialogue: the corpus's next turn would not follow it
                live.append(d)
            else:
                cut += 1
        turn += 1
        log("turn %d: %d answers (%d cut at %d tokens) in %.1fs" % (turn, len(pending), cut, args.max_new,
                                                                  time.time() - t0))
    ids = torch.tensor([t for s in seqs for t in s], dtype=torch.long)
    mask = torch.tensor([m for s in masks for m in s], dtype=torch.bool)
    return ids, mask, texts


# ------------------------------------------------------------------------------------------ distillation

def autocast(device):
    """bf16 autocast on a GPU; plain float32 elsewhere (CPU runs are for smoke tests only)."""
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def final_hidden(model, ids):
    """train.py's Llama.forward without the (tied) output projection."""
    if model.rope is None or model.rope[0].device != ids.device:
        cfg = model.cfg
        model.rope = rope_tables(cfg["dim"] // cfg["n_heads"], cfg["ctx"], cfg["rope_base"], ids.device)
    x = model.embed(ids)
    for b in model.blocks:
        x = b(x, *model.rope)
    return model.norm(x)


def answer_logits(model, x, m):
    """Logits at the answer positions only (the output projection is most of a small model's cost)."""
    return F.linear(final_hidden(model, x)[m], model.embed.weight).float()


@torch.no_grad()
def agreement(draft, target, ids, mask, seq, device):
    """Greedy agreement of draft with target (top-1 equal) and KL(target || draft) on answer tokens."""
    draft.eval()
    same = total = kl = 0.0
    n = (len(ids) - 1) // seq
    for i in range(0, n, 64):
        idx = (torch.arange(i, min(n, i + 64)) * seq)[:, None] + torch.arange(seq)[None, :]
        x, m = ids[idx].to(device), mask[idx + 1].to(device)
        with autocast(device):
            t = answer_logits(target, x, m)
            d = answer_logits(draft, x, m)
        same += (t.argmax(-1) == d.argmax(-1)).sum().item()
        kl += F.kl_div(d.log_softmax(-1), t.log_softmax(-1), log_target=True, reduction="sum").item()
        total += m.sum().item()
    draft.train()
    return same / max(total, 1), kl / max(total, 1)


def distil(name, shape, target, data, valid_sets, args, device, log):
    torch.manual_seed(args.seed)
    draft = Llama(target.cfg["vocab"], ctx=target.cfg["ctx"], dropout=args.dropout, **shape).to(device)
    n_params = sum(p.numel() for p in draft.parameters())
    log("%s: %.2fM parameters %s" % (name, n_params / 1e6, shape))
    opt = torch.optim.AdamW(draft.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if str(device).startswith("cuda") else {}))
    gen = torch.Generator().manual_seed(args.seed)
    warmup, step, start = 200, 0, time.time()
    best = (-1.0, None, 0)
    history = []

    def check():
        nonlocal best
        row = {"step": step, "seconds": round(time.time() - start, 1)}
        for vname, (vi, vm) in valid_sets.items():
            row[vname + "_agreement"], row[vname + "_kl"] = agreement(draft, target, vi, vm, args.seq, device)
        history.append(row)
        log("%s %s" % (name, " ".join("%s %s" % (k, ("%.4f" % v) if isinstance(v, float) else v)
                                       for k, v in row.items())))
        score = row["target_valid_agreement"]
        if score > best[0]:
            best = (score, {k: t.detach().clone() for k, t in draft.state_dict().items()}, step)

    steps = args.steps
    while step < steps and time.time() - start < args.seconds:
        for x, _, m in batches(*data, args.seq, args.batch, gen):
            if step >= steps or time.time() - start >= args.seconds:
                break
            if args.fit and step == 50:  # shorten the schedule so that it ends inside --seconds
                fit = int(0.95 * args.seconds / ((time.time() - start) / 50))
                if fit < steps:
                    log("%s: %d steps fit in %.0fs, not %d" % (name, fit, args.seconds, steps))
                    steps = fit
            lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
            for g in opt.param_groups:
                g["lr"] = lr
            x, m = x.to(device, non_blocking=True), m.to(device, non_blocking=True)
            with autocast(device):
                with torch.no_grad():
                    soft = answer_logits(target, x, m).log_softmax(-1)
                loss = F.kl_div(answer_logits(draft, x, m).log_softmax(-1), soft, log_target=True,
                                reduction="batchmean")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                log("%s step %d lr %.2e kl %.4f" % (name, step, lr, loss.item()))
                check()
    if not history or history[-1]["step"] != step:
        check()
    if step < steps:
        log("%s: stopped by --seconds after %d of %d steps" % (name, step, steps))
    draft.load_state_dict(best[1])
    log("%s done: %d steps in %.0fs, best target-answer agreement %.4f at step %d" %
        (name, step, time.time() - start, best[0], best[2]))
    return draft, dict(shape=shape, params=n_params, steps=step, seconds=round(time.time() - start, 1),
                       best_step=best[2], best_agreement=best[0], history=history)


def parse_shape(s):
    """A SHAPES name or dim,layers,heads,kv_heads,ffn."""
    if s in SHAPES:
        return dict(SHAPES[s])
    dim, n_layers, n_heads, n_kv_heads, ffn = (int(v) for v in s.split(","))
    return dict(dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, ffn=ffn)


# ------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="build/train-data", help="prepare.py's output")
    ap.add_argument("--target", default="models/voxpipe-demo-q8_0.gguf")
    ap.add_argument("--out", default="build/distill")
    ap.add_argument("--shape", action="append", help="draft shape: a train.py SHAPES name or "
                    "dim,layers,heads,kv_heads,ffn (repeatable; default: draft)")
    ap.add_argument("--steps", type=int, default=3500)
    ap.add_argument("--seconds", type=float, default=240, help="stop a draft's training after this long")
    ap.add_argument("--fit", action="store_true", help="measure 50 steps, then shorten --steps (and the "
                    "learning-rate schedule) to what fits in --seconds")
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--max-new", type=int, default=128, help="longest target answer generated")
    ap.add_argument("--gen-batch", type=int, default=2048)
    ap.add_argument("--no-corpus", action="store_true", help="train on the target's dialogues only")
    ap.add_argument("--dtype", choices=["f32", "f16", "q8_0"], default="f16", help="GGUF weight type of the export")
    ap.add_argument("--name", default="voxpipe-demo-draft", help="general.name of the exported draft")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    shapes = args.shape or ["draft"]
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = args.device
    t0 = time.time()
    logf = open(os.path.join(args.out, "distill.log"), "w")

    def log(msg):
        line = "[%6.1fs] %s" % (time.time() - t0, msg)
        print(line, flush=True)
        logf.write(line + "\n")

    report = {"args": vars(args), "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else device}
    target, reader = load_llama(args.target)
    target = target.to(device)
    tok = load_tokenizer(reader)
    for p in target.parameters():
        p.requires_grad_(False)
    log("target %s: %.2fM parameters" % (args.target, sum(p.numel() for p in target.parameters()) / 1e6))

    train_d = load_jsonl(os.path.join(args.data, "train.jsonl"))
    valid_d = load_jsonl(os.path.join(args.data, "valid.jsonl"))
    bench = [{"messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": q},
                           {"role": "assistant", "content": ""}]} for q in BENCH_QUESTIONS]
    _, _, bench_texts = target_dialogues(target, tok, bench, args, device, log)
    report["target_bench_answers"] = [t[-1]["content"] for t in bench_texts]
    held_d = load_jsonl(os.path.join(args.data, "heldout.jsonl"))
    held = [{"messages": h["messages"] + [{"role": "assistant", "content": ""}]} for h in held_d]
    held_t = target_dialogues(target, tok, held, args, device, log)
    with open(os.path.join(args.out, "heldout-target.jsonl"), "w", encoding="utf-8") as f:
        for msgs in held_t[2]:  # the target's greedy answers to the held-out questions, for `voxpipe llm eval --file`
            f.write(json.dumps({"messages": msgs}) + "\n")
    valid_t = target_dialogues(target, tok, valid_d, args, device, log)
    train_t = target_dialogues(target, tok, train_d, args, device, log)
    with gzip.open(os.path.join(args.out, "target-train.jsonl.gz"), "wt", encoding="utf-8") as f:
        for msgs in train_t[2]:
            f.write(json.dumps({"messages": msgs}) + "\n")
    corpus = encode_dialogues(tok, train_d)
    if args.no_corpus:
        data = train_t[:2]
    else:
        data = (torch.cat([train_t[0], corpus[0]]), torch.cat([train_t[1], corpus[1]]))
    log("training tokens %d (%d learned): target dialogues %d, corpus %d" %
        (len(data[0]), int(data[1].sum()), len(train_t[0]), 0 if args.no_corpus else len(corpus[0])))
    valid_sets = {"target_valid": valid_t[:2], "corpus_valid": encode_dialogues(tok, valid_d),
                  "target_heldout": held_t[:2]}
    report["tokens"] = dict(train=len(data[0]), learned=int(data[1].sum()), target_train=len(train_t[0]),
                            target_valid_answers=int(valid_t[1].sum()))

    report["drafts"] = {}
    for i, s in enumerate(shapes):
        name = "draft%d" % i
        draft, stats = distil(name, parse_shape(s), target, data, valid_sets, args, device, log)
        path = os.path.join(args.out, "voxpipe-%s-%s.gguf" % (name, args.dtype))
        stats["gguf_bytes"] = write_gguf(path, draft, tok, args.name, args.dtype)
        stats["file"] = os.path.basename(path)
        report["drafts"][name] = stats
        log("%s exported to %s (%d bytes)" % (name, path, stats["gguf_bytes"]))
        with open(os.path.join(args.out, "report.json"), "w") as f:  # after each draft: a cut-short run keeps it
            json.dump(report, f, indent=1)
        del draft
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    log("all done")


if __name__ == "__main__":
    main()
