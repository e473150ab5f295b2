"""Read a llama GGUF file written by train.py (or quantized by `voxpipe llm quantize`) back into PyTorch.

Tensor types F32, F16, Q8_0 and Q4_0 are dequantized to float32, so a Q8_0 file gives exactly the
weights the engine multiplies by (the engine also rounds activations to Q8_0, which this does not).
The tokenizer comes from the file's own vocabulary and merges, so prompts encode as the engine's do.
"""
import mmap
import struct

GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
TYPE_F32, TYPE_F16, TYPE_Q4_0, TYPE_Q8_0 = 0, 1, 2, 8
# bytes per block and elements per block of each tensor type read here
BLOCKS = {TYPE_F32: (4, 1), TYPE_F16: (2, 1), TYPE_Q4_0: (18, 32), TYPE_Q8_0: (34, 32)}


class Reader:
    """A GGUF file: .meta (key -> value) and .tensors (name -> (type, shape in PyTorch order, byte offset))."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.pos = 0
        if self.buf[:4] != b"GGUF":
            raise ValueError("%s: not a gguf file" % path)
        self.pos = 4
        version, n_tensors, n_kv = self._unpack("<I"), self._unpack("<Q"), self._unpack("<Q")
        if version not in (2, 3):
            raise ValueError("%s: gguf version %d is not supported" % (path, version))
        self.meta = {}
        for _ in range(n_kv):
            key = self._string()
            self.meta[key] = self._value(self._unpack("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            dims = [self._unpack("<Q") for _ in range(self._unpack("<I"))]
            infos.append((name, self._unpack("<I"), tuple(reversed(dims)), self._unpack("<Q")))
        align = self.meta.get("general.alignment", 32)
        base = (self.pos + align - 1) // align * align
        self.tensors = {name: (typ, shape, base + off) for name, typ, shape, off in infos}

    def _unpack(self, fmt):
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _string(self):
        n = self._unpack("<Q")
        self.pos += n
        return self.buf[self.pos - n:self.pos].decode("utf-8")

    def _value(self, typ):
        if typ == GGUF_STRING:
            return self._string()
        if typ == GGUF_ARRAY:
            elem, n = self._unpack("<I"), self._unpack("<Q")
            return [self._value(elem) for _ in range(n)]
        if typ not in GGUF_SCALAR:
            raise ValueError("gguf value type %d is not supported" % typ)
        return self._unpack(GGUF_SCALAR[typ])

    def floats(self, name):
        """The named tensor as a flat list of Python floats, dequantized (standard library only; F32, F16 and
        Q8_0), in the file's element order."""
        typ, shape, off = self.tensors[name]
        n = 1
        for d in shape:
            n *= d
        if typ == TYPE_F32:
            return list(struct.unpack_from("<%df" % n, self.buf, off))
        if typ == TYPE_F16:
            return list(struct.unpack_from("<%de" % n, self.buf, off))
        if typ != TYPE_Q8_0:
            raise ValueError("%s: tensor type %d is not supported" % (name, typ))
        out = []
        for b in range(n // 32):
            at = off + b * 34
            (d,) = struct.unpack_from("<e", self.buf, at)
            out += [d * q for q in struct.unpack_from("<32b", self.buf, at + 2)]
        return out

    def tensor(self, name):
        """The named tensor as float32, dequantized."""
        import numpy as np
        import torch
        typ, shape, off = self.tensors[name]
        if typ not in BLOCKS:
            raise ValueError("%s: tensor type %d is not supported" % (name, typ))
        n = int(np.prod(shape))
        block_bytes, block_len = BLOCKS[typ]
        raw = np.frombuffer(self.buf, np.uint8, n // block_len * block_bytes, off)
        if typ == TYPE_F32:
            out = raw.view("<f4").astype(np.float32)
        elif typ == TYPE_F16:
            out = raw.view("<f2").astype(np.float32)
        else:
            blocks = raw.reshape(-1, block_bytes)
            scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (blocks, 1)
            if typ == TYPE_Q8_0:
                quants = blocks[:, 2:].view(np.int8).astype(np.float32)
            else:  # Q4_0: low nibbles are elements 0..15, high nibbles 16..31, offset 8
                q = blocks[:, 2:]
                quants = np.concatenate([q & 15, q >> 4], axis=1).astype(np.float32) - 8
            out = (quants * scale).reshape(-1)
        return torch.from_numpy(out.reshape(shape).copy())


GGUF_NAMES = dict(attn_norm="attn_norm", wq="attn_q", wk="attn_k", wv="attn_v", wo="attn_output",
                  ffn_norm="ffn_norm", w_gate="ffn_gate", w_up="ffn_up", w_down="ffn_down")


def load_llama(path, ctx=None):
    """train.py's Llama with the file's weights (float32), and the Reader."""
    from train import Llama
    r = Reader(path)
    m = r.meta
    if m.get("general.architecture") != "llama":
        raise ValueError("%s: architecture %r is not llama" % (path, m.get("general.architecture")))
    if "output.weight" in r.tensors:
        raise ValueError("%s: untied output.weight is not supported by train.py's Llama" % path)
    n_layers = m["llama.block_count"]
    model = Llama(len(m["tokenizer.ggml.tokens"]), dim=m["llama.embedding_length"], n_layers=n_layers,
                  n_heads=m["llama.attention.head_count"], n_kv_heads=m["llama.attention.head_count_kv"],
                  ffn=m["llama.feed_forward_length"], ctx=ctx or m["llama.context_length"],
                  eps=m["llama.attention.layer_norm_rms_epsilon"], rope_base=m.get("llama.rope.freq_base", 10000.0))
    state = {"embed.weight": r.tensor("token_embd.weight"), "norm.weight": r.tensor("output_norm.weight")}
    for i in range(n_layers):
        for mod, gg in GGUF_NAMES.items():
            state["blocks.%d.%s.weight" % (i, mod)] = r.tensor("blk.%d.%s.weight" % (i, gg))
    model.load_state_dict(state, strict=True)
    return model.eval(), r


def load_tokenizer(r):
    """A Hugging Face tokenizer equal to the one train.py trained, rebuilt from the file's vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from train import SPECIALS
    tokens = r.meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in r.meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True) for s in SPECIALS])
    return tok
