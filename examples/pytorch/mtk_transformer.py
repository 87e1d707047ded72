"""MTK's Transformer in plain PyTorch: the decoder-only language model (mtk-lm1b) and the
encoder-decoder (mtk-wmt), dense or mixture of experts, evaluated as MTK evaluates them (no
dropout). Loads the weights `mtk-ckpt export` writes (a safetensors file) and computes the same
logits (docs/checkpoint-format.md#safetensors).

Needs only PyTorch (Debian: python3-torch) and Python's standard library.

    import mtk_transformer as mt
    model = mt.load("model.safetensors")            # an MtkTransformer with the file's weights
    logits = model(inputs, segments, positions)     # [batch, length] ints -> [batch, length, vocab]

Inputs as MTK feeds them: token ids, segment ids (1, 2, ... per packed sequence, 0 on padding)
and positions (0, 1, ... within each sequence). An encoder-decoder also takes encoder_inputs,
encoder_segments and encoder_positions.

Parameter names are MTK's variable names with '/' as '.' and 'layer_N' as 'layers.N'
("decoder/layer_0/self_attention/q" -> "decoder.layers.0.self_attention.q"); every tensor keeps
MTK's dim order (the table in docs/checkpoint-format.md).
"""
import json
import math
import re
import struct

import torch
from torch import nn

_DTYPES = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "I32": (torch.int32, 4),
           "I64": (torch.int64, 8), "BF16": (None, 2)}


def read_safetensors(path):
    """(tensors by name, __metadata__) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        dtype, _ = _DTYPES[e["dtype"]]
        if e["dtype"] == "BF16":  # the top 16 bits of a float32
            bits = torch.frombuffer(raw, dtype=torch.int16).to(torch.int32) & 0xFFFF
            t = (bits << 16).view(torch.float32)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"]).clone()
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (float32, float64, int32, int64) as safetensors, names sorted."""
    names = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class Norm(nn.Module):
    """MTK's layer norm (scale and bias) or RMS norm (scale only) over d_model, epsilon 1e-6."""

    def __init__(self, d_model, kind, epsilon):
        super().__init__()
        self.kind, self.epsilon = kind, epsilon
        self.scale = nn.Parameter(torch.ones(d_model))
        if kind == "layer_norm":
            self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        if self.kind == "rms_norm":
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.epsilon) * self.scale
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.epsilon) * self.scale + self.bias


class Attention(nn.Module):
    """Multi-head attention: q, k, v [d_model, heads, d_kv], o [heads, d_kv, d_model]; queries
    scaled by 1/sqrt(d_kv); `bias` [batch, length, memory_length] added to the logits."""

    def __init__(self, d_model, heads, d_kv):
        super().__init__()
        self.d_kv = d_kv
        for name in "qkv":
            setattr(self, name, nn.Parameter(torch.zeros(d_model, heads, d_kv)))
        self.o = nn.Parameter(torch.zeros(heads, d_kv, d_model))

    def forward(self, x, memory, bias):
        q = torch.einsum("bld,dhk->bhlk", x, self.q) * (1.0 / math.sqrt(self.d_kv))
        k = torch.einsum("bmd,dhk->bhmk", memory, self.k)
        v = torch.einsum("bmd,dhk->bhmk", memory, self.v)
        logits = torch.einsum("bhlk,bhmk->bhlm", q, k) + bias[:, None]
        weights = torch.softmax(logits, dim=-1)
        return torch.einsum("bhlk,hkd->bld", torch.einsum("bhlm,bhmk->bhlk", weights, v), self.o)


def gelu(x):  # MTK's: the tanh approximation
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class FeedForward(nn.Module):
    """wi [d_model, d_ff], relu (or gelu), wo [d_ff, d_model]."""

    def __init__(self, d_model, d_ff, use_gelu):
        super().__init__()
        self.use_gelu = use_gelu
        self.wi = nn.Parameter(torch.zeros(d_model, d_ff))
        self.wo = nn.Parameter(torch.zeros(d_ff, d_model))

    def forward(self, x):
        h = x @ self.wi
        return (gelu(h) if self.use_gelu else torch.relu(h)) @ self.wo


def moe_num_groups(batch, length, group_size):
    """MTK's routing groups of batch x length tokens (nn::moe_num_groups)."""
    if group_size in (0, length):
        return batch
    if group_size < length:  # the fewest equal parts of a sequence no longer than group_size
        k = -(-length // group_size)
        while length % k:
            k += 1
        return batch * k
    s = min(batch, group_size // length)  # the most whole sequences that fit
    while batch % s:
        s -= 1
    return batch // s


class MixtureOfExperts(nn.Module):
    """MTK's mixture of experts at evaluation (Mesh-TensorFlow moe v1): top-2 gating with expert
    capacity, padding routed nowhere. gate [d_model, experts], wi [experts, d_model, d_ff],
    wo [experts, d_ff, d_model]; the experts use relu."""

    def __init__(self, d_model, d_ff, moe):
        super().__init__()
        e = moe["num_experts"]
        self.experts, self.options = e, moe
        self.gate = nn.Parameter(torch.zeros(d_model, e))
        self.wi = nn.Parameter(torch.zeros(e, d_model, d_ff))
        self.wo = nn.Parameter(torch.zeros(e, d_ff, d_model))

    def forward(self, x, nonpadding):
        b, l, d = x.shape
        e, o = self.experts, self.options
        groups = moe_num_groups(b, l, o["group_size"])
        xg, ng = x.reshape(groups, -1, d), nonpadding.to(x.dtype).reshape(groups, -1)
        s = xg.shape[1]
        capacity = min(s, max(min(4, s), int(s * o["capacity_factor_eval"] / e)))
        raw = torch.softmax(xg @ self.gate, dim=-1)
        gate_1, index_1 = raw.max(dim=-1)  # the first maximum wins ties, as in MTK
        mask_1 = nn.functional.one_hot(index_1, e).to(x.dtype) * ng[..., None]
        gate_1 = gate_1 * ng
        gate_2, index_2 = (raw * (1 - mask_1)).max(dim=-1)
        mask_2 = nn.functional.one_hot(index_2, e).to(x.dtype) * ng[..., None]
        denom = gate_1 + gate_2 + 1e-9
        gate_1, gate_2 = gate_1 / denom, gate_2 / denom
        policy = o["second_policy_eval"]
        if policy == "none":
            mask_2 = mask_2 * 0
        elif policy == "threshold":
            mask_2 = mask_2 * (gate_2 > o["second_threshold_eval"]).to(x.dtype)[..., None]
        elif policy == "random":
            raise NotImplementedError("moe.second_policy_eval random draws MTK's random numbers")

        def exclusive_cumsum(m):
            return torch.cumsum(m, dim=1) - m

        pos_1 = exclusive_cumsum(mask_1) * mask_1
        mask_1 = mask_1 * (pos_1 < capacity).to(x.dtype)
        count_1 = mask_1.sum(dim=1, keepdim=True)
        pos_2 = (exclusive_cumsum(mask_2) + count_1) * mask_2
        mask_2 = mask_2 * (pos_2 < capacity).to(x.dtype)

        def combine_part(gate, mask, pos):
            flat = mask.sum(-1)
            slot = nn.functional.one_hot((pos * mask).sum(-1).long(), capacity).to(x.dtype)
            return (gate * flat)[..., None, None] * mask[..., None] * slot[:, :, None, :]

        combine = combine_part(gate_1, mask_1, pos_1) + combine_part(gate_2, mask_2, pos_2)
        dispatch = (combine > 0).to(x.dtype)
        expert_in = torch.einsum("gsec,gsd->egcd", dispatch, xg)
        h = torch.relu(torch.einsum("egcd,edf->egcf", expert_in, self.wi))
        out = torch.einsum("egcf,efd->egcd", h, self.wo)
        return torch.einsum("gsec,egcd->gsd", combine, out).reshape(b, l, d)


class Layer(nn.Module):
    """A pre-norm layer: x + self_attention(norm_1(x)), [x + encdec_attention(norm_encdec(x),
    encoder output)], x + ffn or moe (norm_2(x))."""

    def __init__(self, c, index, cross):
        super().__init__()
        eps = c.get("norm_epsilon", 1e-6)
        dm, heads, dkv = c["d_model"], c["num_heads"], c["d_kv"]
        self.norm_1 = Norm(dm, c["norm"], eps)
        self.self_attention = Attention(dm, heads, dkv)
        if cross:
            self.norm_encdec = Norm(dm, c["norm"], eps)
            self.encdec_attention = Attention(dm, heads, dkv)
        self.norm_2 = Norm(dm, c["norm"], eps)
        if c["moe_every"] > 0 and (index + 1) % c["moe_every"] == 0:
            self.moe = MixtureOfExperts(dm, c["d_ff"], c["moe"])
        else:
            self.ffn = FeedForward(dm, c["d_ff"], c["gelu"])

    def forward(self, x, bias, nonpadding, memory=None, cross_bias=None):
        h = self.norm_1(x)
        x = x + self.self_attention(h, h, bias)
        if memory is not None:
            x = x + self.encdec_attention(self.norm_encdec(x), memory, cross_bias)
        h = self.norm_2(x)
        return x + (self.moe(h, nonpadding) if hasattr(self, "moe") else self.ffn(h))


class Stack(nn.Module):
    """The encoder or the decoder: embedding and positions (unless shared), layers, final norm."""

    def __init__(self, c, layers, cross, tables):
        super().__init__()
        if tables:
            self.embedding = nn.Parameter(torch.zeros(c["vocab_size"], c["d_model"]))
            self.positions = nn.Parameter(torch.zeros(c["length"], c["d_model"]))
        self.layers = nn.ModuleList(Layer(c, i, cross) for i in range(layers))
        self.final_norm = Norm(c["d_model"], c["norm"], c.get("norm_epsilon", 1e-6))

    def forward(self, x, bias, nonpadding, memory=None, cross_bias=None):
        for layer in self.layers:
            x = layer(x, bias, nonpadding, memory, cross_bias)
        return self.final_norm(x)


def attention_bias(query_segments, memory_segments, causal=False, window=0):
    """MTK's additive mask [batch, length, memory_length]: -1e9 for another segment, and when
    causal for later positions (with a window: also positions `window` or more before)."""
    same = (query_segments[:, :, None] == memory_segments[:, None, :])
    bias = (1 - same.to(torch.float64)) * -1e9
    if causal:
        i = torch.arange(query_segments.shape[1])[:, None]
        j = torch.arange(memory_segments.shape[1])[None, :]
        outside = j > i
        if window > 0:
            outside = outside | (i - j >= window)
        bias = bias + outside.to(torch.float64) * -1e9
    return bias


class MtkTransformer(nn.Module):
    """The model of an `mtk_model` config (the JSON in an export's metadata)."""

    def __init__(self, config):
        super().__init__()
        c = self.config = dict(config)
        encoder_layers = c["num_encoder_layers"]
        shared = c["shared_embedding"]
        if shared:
            self.shared = nn.Module()
            self.shared.embedding = nn.Parameter(torch.zeros(c["vocab_size"], c["d_model"]))
            self.shared.positions = nn.Parameter(torch.zeros(c["length"], c["d_model"]))
        if encoder_layers > 0:
            self.encoder = Stack(c, encoder_layers, False, not shared)
        self.decoder = Stack(c, c["num_layers"], encoder_layers > 0, not shared)
        self.decoder.softmax = nn.Parameter(torch.zeros(c["vocab_size"], c["d_model"]))

    def embed(self, stack, ids, positions):
        tables = self.shared if self.config["shared_embedding"] else stack
        return tables.embedding[ids.long()] + tables.positions[positions.long()]

    def forward(self, inputs, segments, positions, encoder_inputs=None, encoder_segments=None,
                encoder_positions=None):
        dtype = self.decoder.softmax.dtype
        memory, cross_bias = None, None
        if self.config["num_encoder_layers"] > 0:
            enc_bias = attention_bias(encoder_segments, encoder_segments).to(dtype)
            x = self.embed(self.encoder, encoder_inputs, encoder_positions)
            memory = self.encoder(x, enc_bias, encoder_segments > 0)
            cross_bias = attention_bias(segments, encoder_segments).to(dtype)
        bias = attention_bias(segments, segments, True, self.config["attention_window"]).to(dtype)
        x = self.embed(self.decoder, inputs, positions)
        x = self.decoder(x, bias, segments > 0, memory, cross_bias)
        return torch.einsum("bld,vd->blv", x, self.decoder.softmax)


def parameter_name(mtk_name):
    """MTK's variable name -> this module's parameter name."""
    return re.sub(r"layer_(\d+)", r"layers.\1", mtk_name).replace("/", ".")


def load(path, dtype=torch.float32):
    """An MtkTransformer with the weights of an `mtk-ckpt export` file, in `dtype`. Fails naming
    every parameter the file lacks or has in excess, and every shape that differs."""
    tensors, meta = read_safetensors(path)
    model = MtkTransformer(json.loads(meta["mtk_model"]))
    params = dict(model.named_parameters())
    state, problems = {}, []
    for name, t in tensors.items():
        p = parameter_name(name)
        if p not in params:
            problems.append(f"{name}: not a parameter of the model")
        elif tuple(params[p].shape) != tuple(t.shape):
            problems.append(f"{name}: file {tuple(t.shape)}, model {tuple(params[p].shape)}")
        else:
            state[p] = t
    problems += [f"{mtk_name(p)}: not in the file" for p in params if p not in state]
    if problems:
        raise ValueError(f"{path} does not fit its mtk_model: " + "; ".join(problems))
    model.load_state_dict(state)
    model.metadata = meta
    return model.to(dtype).eval()


def mtk_name(parameter):
    """This module's parameter name -> MTK's variable name (parameter_name's inverse)."""
    return re.sub(r"layers\.(\d+)", r"layer_\1", parameter).replace(".", "/")


def save(model, path):
    """Writes the model's weights as float32 under MTK's names with its mtk_model, as
    `mtk-ckpt import` reads them (weights trained or changed in PyTorch back into MTK). The
    metadata of the file the model was loaded from is kept: unchanged weights give the file's
    bytes back (as F32)."""
    tensors = {mtk_name(n): p.detach().to(torch.float32) for n, p in model.named_parameters()}
    meta = dict(getattr(model, "metadata", {}))  # a loaded file's (vocabulary, dims) kept
    meta.update({"format": "pt", "mtk_format": "mtk-safetensors-1"})
    if json.loads(meta.get("mtk_model", "null")) != model.config:
        meta["mtk_model"] = json.dumps(model.config, separators=(",", ":"), sort_keys=True)
    write_safetensors(path, tensors, meta)
