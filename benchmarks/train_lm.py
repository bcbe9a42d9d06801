"""One training step of two character language models (context 64, batch 32, float32):
steps per second.

``transformer``: Embedding(96, 128) + learned positions Embedding(64, 128) -> 2 pre-LN
blocks [x + causal 4-head attention(LN(x)); x + Linear(128, 512) -> tanh-GELU ->
Linear(512, 128) of LN(x)] -> LN -> Linear(128, 96); AdamW (1e-3, weight decay 0.01)
after clipping the gradient to global norm 1.
``lstm``: Embedding(96, 128) -> LSTM(128 -> 256) over the 64 steps -> Linear(256, 96);
Adam (2e-3) after clipping to global norm 1.  Both: cross-entropy with integer labels,
mean over the 32 x 64 predictions.

A step is the loss, its gradient, the clipping and the optimiser update, in one compiled
function where the system has one: ``pb.jit`` of pb.nn / pb.optim code (the models,
loss and optimisers of ``examples/char_lm.py``; the LSTM a Python loop over time),
``jax.jit`` of jax.numpy with Optax (``jax.nn.dot_product_attention``; the LSTM as
``lax.scan``), torch eager (``nn.MultiheadAttention``, ``nn.LSTM``, the
optimiser with ``foreach`` and with ``fused``) and ``torch.compile`` of the whole step
(not with ``--quick``).  Every system starts from pullback's initial parameters (key 0,
converted to each layout) and trains on the same 10 batches in turn: windows of 65
characters at fixed random offsets in the first 3,000,000 characters of the standard
library's top-level ``.py`` files (sorted by name; newline and printable ASCII kept, as
ids 0..95).  ``rel err`` compares the losses of the first 20 steps with torch eager in
float64; the note gives the loss at step 20.

    python benchmarks/train_lm.py [--quick] [--threads 1|2|both] [--only SYSTEMS]
                                  [--json PATH]
"""

from __future__ import annotations

import _harness as H

args = H.setup("train_lm")

import sys  # noqa: E402
import sysconfig  # noqa: E402
from pathlib import Path  # noqa: E402

import _training as T  # noqa: E402
import numpy as np  # noqa: E402

import pullback as pb  # noqa: E402

# The models, their loss and optimisers are the example's (examples/char_lm.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import char_lm as LM  # noqa: E402

VOCAB, CONTEXT, BATCH, DIM, HEADS, HIDDEN = LM.VOCAB, LM.CONTEXT, LM.BATCH, 128, 4, 256
LR, WEIGHT_DECAY, CLIP, LAYERS = LM.LR, LM.WEIGHT_DECAY, LM.CLIP, LM.LAYERS
CORPUS_CHARS = 3_000_000


def corpus_batches(n: int = 10) -> list[tuple[np.ndarray, np.ndarray]]:
    """n batches of BATCH windows (inputs, next characters) at fixed random offsets."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    text = "".join(p.read_text(encoding="utf-8", errors="replace")
                   for p in sorted(stdlib.glob("*.py")))
    codes = np.frombuffer(text.encode("ascii", errors="ignore"), np.uint8)
    codes = codes[(codes == 10) | ((codes >= 32) & (codes <= 126))][:CORPUS_CHARS]
    ids = np.where(codes == 10, 0, codes.astype(np.int64) - 31)
    starts = np.random.default_rng(0).integers(0, len(ids) - CONTEXT, (n, BATCH))
    windows = ids[starts[:, :, None] + np.arange(CONTEXT + 1)]
    return [(np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])) for w in windows]


BATCHES = corpus_batches()
PB = {name: LM.make_model(name, pb.random.key(0)) for name in ("transformer", "lstm")}
pb_loss = LM.loss_fn


def _arrays(model) -> dict[str, np.ndarray]:
    """The model's arrays by path, the MLP's two Linear layers named as the peers name
    them (``mlp.layers.0`` -> ``mlp_in``, ``mlp.layers.2`` -> ``mlp_out``)."""
    return {k.replace("mlp.layers.0", "mlp_in").replace("mlp.layers.2", "mlp_out"): v
            for k, v in T.named_arrays(model).items()}


ARRAYS = {name: _arrays(model) for name, (model, _) in PB.items()}

# ------------------------------------------------------------------ torch: the reference
REF = H.shared("reference")  # the losses of torch eager in float64, made once per run
torch = H.optional("torch") if H.want("torch") or H.want("torch.compile") or REF is None \
    else None
if torch is not None:
    import torch.nn.functional as F

    H.pin_torch(torch)

    class TorchBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(DIM)
            self.attn = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True)
            self.ln2 = torch.nn.LayerNorm(DIM)
            self.mlp_in = torch.nn.Linear(DIM, 4 * DIM)
            self.mlp_out = torch.nn.Linear(4 * DIM, DIM)

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, is_causal=True, need_weights=False)[0]
            return x + self.mlp_out(F.gelu(self.mlp_in(self.ln2(x)), approximate="tanh"))

    class TorchTransformerLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, DIM)
            self.pos = torch.nn.Embedding(CONTEXT, DIM)
            self.blocks = torch.nn.ModuleList(TorchBlock() for _ in range(LAYERS))
            self.ln = torch.nn.LayerNorm(DIM)
            self.head = torch.nn.Linear(DIM, VOCAB)

        def forward(self, ids):
            steps = ids.shape[1]
            mask = torch.ones(steps, steps, dtype=torch.bool, device=ids.device).triu(1)
            x = self.embed(ids) + self.pos.weight[:steps]
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln(x))

    class TorchLSTMLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, DIM)
            self.lstm = torch.nn.LSTM(DIM, HIDDEN, batch_first=True)
            self.head = torch.nn.Linear(HIDDEN, VOCAB)

        def forward(self, ids):
            return self.head(self.lstm(self.embed(ids))[0])

    def transformer_arrays(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Linear weights to [out, in]; the attention's projections packed as
        ``in_proj`` (q, k, v) and ``out_proj``."""
        out = {k: v.T if k.endswith(("mlp_in.weight", "mlp_out.weight", "head.weight")) else v
               for k, v in a.items() if ".attn." not in k}
        for i in range(LAYERS):
            p = f"blocks.{i}.attn."
            out[p + "in_proj_weight"] = np.concatenate([a[p + w].T for w in ("wq", "wk", "wv")])
            out[p + "in_proj_bias"] = np.concatenate([a[p + b] for b in ("bq", "bk", "bv")])
            out[p + "out_proj.weight"] = a[p + "wo"].T
            out[p + "out_proj.bias"] = a[p + "bo"]
        return out

    def lstm_arrays(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Linear and LSTM weights to [out, in], torch's LSTM parameter names."""
        names = {"w_ih": "weight_ih_l0", "w_hh": "weight_hh_l0", "b_ih": "bias_ih_l0",
                 "b_hh": "bias_hh_l0"}
        return {"embed.weight": a["embed.weight"], "head.weight": a["head.weight"].T,
                "head.bias": a["head.bias"],
                **{f"lstm.{t}": a[f"lstm.cell.{p}"].T for p, t in names.items()}}

    TORCH = {"transformer": (TorchTransformerLM, transformer_arrays, torch.optim.AdamW,
                             {"weight_decay": WEIGHT_DECAY}),
             "lstm": (TorchLSTMLM, lstm_arrays, torch.optim.Adam, {})}

    def torch_loss(logits, targets):
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    def torch_step(name: str, dtype, *, fused: bool = False,
                   compiled: bool = False) -> T.Step:
        """A fresh model at the initial parameters and its optimiser."""
        module, convert, optimiser, options = TORCH[name]
        model = T.load_torch(module().to(dtype), convert(ARRAYS[name]))
        opt = optimiser(model.parameters(), lr=LR[name], foreach=not fused, fused=fused,
                        **options)
        return T.torch_step(model, torch_loss, opt, clip=CLIP, compiled=compiled)

    TORCH_BATCHES = [tuple(torch.from_numpy(a) for a in batch) for batch in BATCHES]
    if REF is None:
        REF = H.share("reference", {name: T.losses(torch_step(name, torch.float64),
                                                   TORCH_BATCHES) for name in PB})
if REF is None:
    REF = {name: None for name in PB}
    H.note("no float64 reference (torch is not installed): rel err not checked")

# ------------------------------------------------------------------ jax
jax = H.optional("jax") if H.want("jax") else None
optax = H.optional("optax") if jax is not None else None
if optax is not None:
    import jax.numpy as jnp
    from jax import lax

    def layer_norm(p, name, x):
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(p, name, x):
        return x @ p[name + ".weight"] + p[name + ".bias"]

    def attention(p, name, x):
        b, t, d = x.shape

        def heads(w):
            return (x @ p[f"{name}.w{w}"] + p[f"{name}.b{w}"]).reshape(b, t, HEADS, d // HEADS)

        out = jax.nn.dot_product_attention(heads("q"), heads("k"), heads("v"), is_causal=True)
        return out.reshape(b, t, d) @ p[name + ".wo"] + p[name + ".bo"]

    def jax_transformer(p, ids):
        x = p["embed.weight"][ids] + p["pos.weight"][:ids.shape[1]]
        for i in range(LAYERS):
            blk = f"blocks.{i}."
            x = x + attention(p, blk + "attn", layer_norm(p, blk + "ln1", x))
            h = jax.nn.gelu(linear(p, blk + "mlp_in", layer_norm(p, blk + "ln2", x)))
            x = x + linear(p, blk + "mlp_out", h)
        return linear(p, "head", layer_norm(p, "ln", x))

    def jax_lstm(p, ids):
        """The input products for all steps at once, then ``lax.scan`` over time."""
        w_hh = p["lstm.cell.w_hh"]
        xw = p["embed.weight"][ids] @ p["lstm.cell.w_ih"] + p["lstm.cell.b_ih"]
        xw = jnp.swapaxes(xw + p["lstm.cell.b_hh"], 0, 1)

        def cell(carry, xw_t):
            h, c = carry
            i, f, g, o = jnp.split(xw_t + h @ w_hh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((ids.shape[0], HIDDEN), xw.dtype)
        _, hs = lax.scan(cell, (zeros, zeros), xw)
        return linear(p, "head", jnp.swapaxes(hs, 0, 1))

    def jax_loss(forward):
        def loss(p, ids, targets):
            logits = forward(p, ids).reshape(-1, VOCAB)
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, targets.reshape(-1)).mean()
        return loss

    JAX = {"transformer": (jax_transformer,
                           optax.adamw(LR["transformer"], weight_decay=WEIGHT_DECAY)),
           "lstm": (jax_lstm, optax.adam(LR["lstm"]))}
    JAX_BATCHES = [tuple(jax.device_put(a.astype(np.int32)) for a in batch)
                   for batch in BATCHES]

# ------------------------------------------------------------------ the systems
H.warm("pullback")
if optax is not None:
    H.warm("jax")
if torch is not None and H.want("torch.compile") and not H.quick():
    H.warm("torch.compile")
for name, (model, optimiser) in PB.items():
    T.train_rows("pullback jit(step)", T.pullback_step(pb_loss, optimiser, model), BATCHES,
                 REF[name], model=name, kind="pullback")
    if optax is not None:
        forward, tx = JAX[name]
        params = {k: jax.device_put(v) for k, v in ARRAYS[name].items()}
        T.train_rows("jax.jit(step), optax", T.jax_step(
            jax_loss(forward), optax.chain(optax.clip_by_global_norm(CLIP), tx), params),
            JAX_BATCHES, REF[name], model=name)
    if torch is not None and H.want("torch"):
        for fused in (False, True):
            T.train_rows(f"torch eager, {'fused' if fused else 'foreach'} optimiser",
                         torch_step(name, torch.float32, fused=fused), TORCH_BATCHES,
                         REF[name], model=name, compiled=False)
    if torch is not None and H.want("torch.compile") and not H.quick():
        T.train_rows("torch.compile(step), foreach optimiser",
                     torch_step(name, torch.float32, compiled=True), TORCH_BATCHES,
                     REF[name], model=name)

H.finish(f"character LMs, context {CONTEXT}, batch {BATCH}, vocabulary {VOCAB}, float32: "
         f"transformer d={DIM}, {LAYERS} layers, {HEADS} heads, AdamW lr={LR['transformer']} "
         f"wd={WEIGHT_DECAY}; LSTM {DIM}->{HIDDEN}, Adam lr={LR['lstm']}; gradients clipped "
         f"to norm {CLIP}; {len(BATCHES)} batches in turn; rel err: losses of steps "
         f"1..{T.STEPS} against torch eager in float64")
