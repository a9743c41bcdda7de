"""sage in the PyTorch ecosystem, on the GPU: torch.compile, CUDA graphs,
Hugging Face transformers, peak memory. One run, every check, one table.

    python3 bench/torch_integration.py OUT.json OUT.md [--steps 50] [--only NAMES]
        [--seed 0] [--seeds 8,9,10,11] [--noise-twins 6]

Checks (each PASS/FAIL with its numbers):

* ``opcheck``: ``torch.library.opcheck`` of ``sage::attention_fwd``/``_bwd`` on CUDA;
* ``explain``: ``torch._dynamo.explain`` of a function calling ``sage.attention``
  and of a whole tiny transformers model: one graph, no break;
* ``compile``: ``torch.compile`` (inductor) fwd+bwd vs eager;
* ``reduce-overhead``: the same with CUDA graphs, no cudagraph skips;
* ``cuda-graph``: a manual ``torch.cuda.graph`` capture of fwd+bwd, replayed on
  new inputs vs eager on them; nothing compiled during the capture;
* ``llama``/``qwen3`` training: 50 steps on one fixed batch with
  ``attn_implementation="sage"`` vs the SDPA twin (same weights, same data),
  at each of several seeds (``--seeds``, default 8-11): every run must learn
  (end below the batch's bigram bound, which only attention can beat), and
  sage's loss drift must stay within what the *noise twins* show: the SDPA
  twin with random noise added to dQ, dK, dV in its attention backward,
  calibrated so that each step's parameter gradient is perturbed as much
  as sage perturbs it (see ``bigram_bound``, ``gradient_perturbations``,
  ``noise_schedule``, ``noise_twin_summary`` and ``calibrated_verdict``).
  The earlier criterion (the *exact twins*, SDPA pinned to its math and
  flash backends, their drift scaled by the perturbation ratio, pooled:
  ``tracking_verdict``, ``pooled_verdict``) is still computed and reported,
  for the record;
* ``generate``: greedy tokens vs SDPA's until the first near tie;
* ``memory``: peak memory of fwd+bwd vs cuDNN SDPA at B1 H16 N16K, D 64 and 128.

It uses the *installed* package (scripts/gpu/run.sh stage ``package``
installs it without network and runs this from outside the checkout).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import torch

import sage
import sage.attention_ops  # noqa: F401  (registers torch.ops.sage.*)
from sage.integrations import transformers as sage_hf
from sage.kernels.sagebwd.torch_ops import JIT_KERNELS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, markdown_table, write_outputs  # noqa: E402

DEVICE = "cuda"
# In the JSON, not in the printed lines:
QUIET = ("trace", "curves", "rule", "perturbations_per_step", "per_seed",
         "exact_twins_pooled")


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 error of ``a`` against ``b``."""
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def inputs(b=2, h=8, hkv=4, n=1024, n_kv=1024, d=128, dtype=torch.bfloat16, seed=0,
           layout="bshd"):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)

    def make(heads, length):
        shape = (b, length, heads, d) if layout == "bshd" else (b, heads, length, d)
        return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype).requires_grad_()
    return make(h, n), make(hkv, n_kv), make(hkv, n_kv)


def attn(q, k, v):
    return sage.attention(q, k, v, causal=True, layout="bshd")


def fwd_bwd(fn: Callable, q, k, v, do):
    for x in (q, k, v):
        x.grad = None
    o = fn(q, k, v)
    o.backward(do)
    return [o.detach().clone()] + [x.grad.clone() for x in (q, k, v)]


def compiled_kernels() -> int:
    """How many kernel specialisations the JIT has compiled in this process."""
    return sum(len(kernel._kernels) for kernel in JIT_KERNELS.values())


# ---------------------------------------------------------------------------


def check_opcheck() -> dict[str, Any]:
    q, k, v = inputs(b=1, h=2, hkv=1, n=100, n_kv=160, d=64)
    flags = (True, 0.125, True, False, "bshd", "fine")
    torch.library.opcheck(torch.ops.sage.attention_fwd.default, (q, k, v) + flags)
    out = torch.ops.sage.attention_fwd(q, k, v, *flags)
    do = torch.randn_like(out[0])
    torch.library.opcheck(torch.ops.sage.attention_bwd.default,
                          (do,) + tuple(x.detach() for x in out[2:7])
                          + (v.detach(), out[0].detach(), out[1].detach()) + flags)
    return {"pass": True, "detail": "fwd and bwd: schema, autograd registration, fake "
                                    "tensor, aot dispatch (dynamic)"}


def check_explain_function() -> dict[str, Any]:
    q, k, v = inputs()
    explanation = torch._dynamo.explain(attn)(q, k, v)
    ok = explanation.graph_count == 1 and explanation.graph_break_count == 0
    return {"pass": ok, "graphs": explanation.graph_count,
            "breaks": explanation.graph_break_count,
            "reasons": [str(r.reason) for r in explanation.break_reasons][:3]}


def check_compile(mode: str | None) -> dict[str, Any]:
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    q, k, v = inputs(seed=1)
    do = torch.randn_like(q)
    eager = fwd_bwd(attn, q, k, v, do)
    compiled_fn = torch.compile(attn, fullgraph=True, mode=mode)
    for _ in range(3):  # reduce-overhead records the graph on the later calls
        got = fwd_bwd(compiled_fn, q, k, v, do)
    errors = {name: rel(a, b) for name, a, b in zip(("o", "dq", "dk", "dv"), got, eager)}
    skips = int(counters["inductor"].get("cudagraph_skips", 0))
    # Same kernels, same inputs: O bitwise; gradients up to the order of f32 atomics.
    ok = errors["o"] == 0.0 and max(errors.values()) < 1e-3
    if mode == "reduce-overhead":
        ok = ok and skips == 0
    return {"pass": ok, "errors_vs_eager": errors, "cudagraph_skips": skips}


def check_cuda_graph() -> dict[str, Any]:
    q, k, v = inputs(seed=2)
    do = torch.randn_like(q)
    static = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    static_do = do.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up: compiles and loads every kernel
        for _ in range(2):
            fwd_bwd(attn, *static, static_do)
    torch.cuda.current_stream().wait_stream(stream)
    for x in static:
        x.grad = None
    before = compiled_kernels()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_o = attn(*static)
        static_o.backward(static_do)
    during = compiled_kernels() - before
    new = inputs(seed=3)
    new_do = torch.randn_like(q)
    for dst, src in zip(static + [static_do], list(new) + [new_do]):
        dst.detach().copy_(src.detach())
    graph.replay()
    torch.cuda.synchronize()
    got = [static_o] + [x.grad for x in static]
    want = fwd_bwd(attn, *new, new_do)
    errors = {name: rel(a, b) for name, a, b in zip(("o", "dq", "dk", "dv"), got, want)}
    ok = errors["o"] == 0.0 and max(errors.values()) < 1e-3 and during == 0
    return {"pass": ok, "errors_vs_eager": errors, "kernels_compiled_during_capture": during}


# --- transformers -------------------------------------------------------------


def hf_config(kind: str):
    import transformers
    common = dict(vocab_size=VOCAB, hidden_size=512, intermediate_size=1024,
                  num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                  head_dim=64, max_position_embeddings=1024, attention_dropout=0.0)
    return transformers.LlamaConfig(**common) if kind == "llama" \
        else transformers.Qwen3Config(**common)


def hf_models(kind: str, count: int = 2) -> list:
    """``count`` copies of the same random float32 weights: the first under
    "sage" attention, the others under "sdpa" (the SDPA twin, then the exact
    twins, which ``train`` pins to one SDPA backend each)."""
    import transformers
    torch.manual_seed(SEED)
    models = [transformers.AutoModelForCausalLM.from_config(
        hf_config(kind), attn_implementation="sage" if i == 0 else "sdpa").to(DEVICE)
        for i in range(count)]
    for model in models[1:]:
        model.load_state_dict(models[0].state_dict())
    return models


def hf_twins(kind: str):
    """The same random float32 weights under "sage" and "sdpa" attention."""
    sage_model, sdpa_model = hf_models(kind, 2)
    return sage_model, sdpa_model


# The training data: ONE fixed batch of random tokens, seen at every step (the
# "overfit one batch" check). A fixed batch makes the loss curve smooth (no
# batch-to-batch zig-zag to blur the comparison), and a model can memorise it
# only through attention: see bigram_bound. (The 2026-11-23 run cycled four
# batches; Llama then fell only to 0.69x its initial loss in 50 steps.)
VOCAB = 512
TRAIN_SHAPE = (4, 256)  # batch, tokens
# The seed of the random weights and of the batch, read at call time: --seed
# for the checks that build a model outside training (explain, generate), and
# set to each of TRAIN_SEEDS in turn by check_training (see pooled_verdict).
SEED = 0
# The training check's seeds (--seeds), pre-registered on 2026-11-23 with the
# noise-twin criterion (CALIBRATED_RULE), before any run at them. Seeds 0-3
# (2026-11-23 exact-twins record) and 4-7 (pooled record) have been run and
# their outcomes are known, so they are not part of this verdict.
TRAIN_SEEDS = (8, 9, 10, 11)


class seeded:
    """``with seeded(n):`` sets SEED to ``n`` and restores it after."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self):
        global SEED
        self.saved, SEED = SEED, self.seed

    def __exit__(self, *exc):
        global SEED
        SEED = self.saved


def train_batch(device: str | torch.device | None = None) -> torch.Tensor:
    """The fixed training batch on ``device`` (default DEVICE): TRAIN_SHAPE
    uniform random tokens below VOCAB, seeded by SEED (all read at call
    time, so the CPU tests can shrink them)."""
    gen = torch.Generator().manual_seed(SEED)
    return torch.randint(0, VOCAB, TRAIN_SHAPE, generator=gen).to(device or DEVICE)


def bigram_bound(ids: torch.Tensor) -> float:
    """The lowest loss a model can reach on ``ids`` without attention mixing
    tokens: the empirical conditional entropy H(next | current) of the
    batch's (current, next) pairs, in nats per predicted token.

    Without attention (or with attention that only returns each position's
    own value), a decoder's prediction at a position is a function of the
    current token alone (RoPE models have no other position signal), and the
    best such function on a fixed batch predicts the empirical distribution
    of successors of each token, whose cross entropy is exactly this. The
    causal-LM loss averages over the same B x (N-1) predictions. A loss below
    it means the model used context, i.e. attention learned."""
    rows = ids.detach().cpu().tolist()
    pairs: dict[tuple[int, int], int] = {}
    firsts: dict[int, int] = {}
    for row in rows:
        for a, b in zip(row[:-1], row[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
            firsts[a] = firsts.get(a, 0) + 1
    total = sum(pairs.values())
    return -sum(c / total * math.log(c / firsts[a]) for (a, _), c in pairs.items())


# The exact twins: the SDPA twin's model pinned to one SDPA backend each.
# Every one computes exact attention at bf16 inputs and outputs; they differ
# from torch's own choice (cuDNN's fused kernel on the H100) only in rounding
# and summation order. MATH computes QK^T, the softmax and PV in float32 with
# unfused matmuls and rounds O once (allow_fp16_bf16_reduction_math_sdp is
# False by default); FLASH_ATTENTION (FlashAttention-2) and
# EFFICIENT_ATTENTION (xformers' kernel) use an online softmax in blocks and
# round P to bf16 before PV, as cuDNN does, in other block orders. A backend
# that does not take the model (torch 2.11's efficient kernel refuses the GQA
# models here: transformers passes enable_gqa) gives no twin; its error is
# recorded and the others stand.
EXACT_TWINS = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")
# Steps at which the per-step gradient perturbations are measured (see
# gradient_perturbations), and the noise twins calibrated: every PROBE_EVERY
# steps from step 0 (5: the descent, where drifts peak, runs from about step 8
# to 20, and the calibration should follow it). The exact twins' bar keeps
# its definition of 2026-11-23: the mean over the probes at multiples of
# BAR_EVERY (steps 0, 10, 20, 30, 40).
PROBE_EVERY = 5
BAR_EVERY = 10


# --- the noise twins -----------------------------------------------------------
#
# A noise twin is the SDPA twin (same weights, same data, same optimizer, the
# same forward: torch's own SDPA choice) whose attention backward adds random
# noise to dQ, dK and dV: for each of these gradients g (per layer, as the
# attention returns them, K and V at the key/value heads), a fresh Gaussian
# direction scaled to relative L2 magnitude r, ||noise|| = r ||g||. What it
# measures: how far a training drifts from the SDPA twin when each step's
# gradient carries random errors of sage's size.
#
# "Sage's size" is matched at the level of the parameter gradients, not at
# dQ, dK, dV. Sage also perturbs the forward (8-bit Q, K, P: the loss, the
# activations and every gradient downstream change), so noise matched to its
# dQ/dK/dV error alone would perturb the parameter gradients less than sage
# does. The training sees the parameter gradients: at every probe step the
# SDPA twin's gradient at its own weights is recomputed with the noise at a
# trial scale; the backward is linear in its incoming gradient, so the
# parameter perturbation is proportional to r (the gain), and r = sage's
# perturbation / gain makes them equal. Between probes r is interpolated
# linearly, after the last it stays (noise_schedule). A second, fresh draw at
# the calibrated r checks it (calibration_ratio).

NOISE_IMPLEMENTATION = "sdpa_noise"
# The trial scale of the calibration (any small value: the gain is linear).
NOISE_TRIAL_SCALE = 0.03
# How many noise twins (noise seeds) per model and seed (--noise-twins).
NOISE_TWINS = 6
# The calibration must reproduce sage's mean perturbation within these bounds
# (a fresh draw at the calibrated scales, against sage's, mean over the probes).
CALIBRATION_BOUNDS = (0.8, 1.25)


class _Noise:
    """The noise twins' state: the scale r (0: no noise, bit for bit the
    SDPA twin) and the generator of the noise. ``train`` and the calibration
    set them; the attention reads the scale at each forward."""

    scale: float = 0.0
    generator: torch.Generator | None = None

    def perturb(self, grad: torch.Tensor, scale: float) -> torch.Tensor:
        """``grad`` plus Gaussian noise of relative L2 magnitude ``scale``."""
        if scale == 0.0:
            return grad
        z = torch.randn(grad.shape, generator=self.generator, device=grad.device,
                        dtype=torch.float32)
        g = grad.float()
        return (g + z * (scale * g.norm() / z.norm())).to(grad.dtype)


NOISE = _Noise()


class _GradNoise(torch.autograd.Function):
    """Identity forward; the backward adds NOISE at the scale of the forward."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return NOISE.perturb(grad, ctx.scale), None


def noisy_sdpa_attention(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention (torch's own backend choice), with
    NOISE added to dQ, dK, dV in the backward (see the noise twins above)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    scale = NOISE.scale
    if scale:
        query, key, value = (_GradNoise.apply(x, scale) for x in (query, key, value))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def register_noise_twin() -> None:
    """Registers ``attn_implementation=NOISE_IMPLEMENTATION`` (SDPA's mask
    function too: the same masks, the same forward as "sdpa")."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    AttentionInterface.register(NOISE_IMPLEMENTATION, noisy_sdpa_attention)
    AttentionMaskInterface.register(NOISE_IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _noise_generator(device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _pin(backend: str | None):
    """A context pinning scaled_dot_product_attention to ``backend`` (a
    ``SDPBackend`` name); None leaves torch's own choice."""
    import contextlib
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return contextlib.nullcontext() if backend is None \
        else sdpa_kernel(getattr(SDPBackend, backend))


def _loss(model, ids: torch.Tensor, backend: str | None = None) -> torch.Tensor:
    """The causal-LM loss under bf16 autocast (attention runs in bf16)."""
    with _pin(backend), torch.autocast(ids.device.type, dtype=torch.bfloat16):
        return model(input_ids=ids, labels=ids).loss


def gradient_perturbations(model, ids: torch.Tensor, probes: dict[str, tuple[str, str | None]],
                           calibrate: int | None = None) -> dict[str, float | str | None]:
    """How much each attention implementation perturbs one training step.

    At ``model``'s current weights (an SDPA model: the SDPA twin during its
    training), the gradient of the loss on ``ids`` under torch's own SDPA
    choice is the reference; each probe ``name: (attn_implementation,
    SDPBackend name or None)`` recomputes it with that attention, and its
    perturbation is the relative L2 difference of all parameter gradients
    from the reference. Nothing is written to ``.grad`` (the optimizer's
    state is untouched). A probe that cannot run gives its error text.

    With ``calibrate`` (a noise seed) and a "sage" probe, the noise twins are
    calibrated here too: ``noise_gain`` is the perturbation of the noise
    attention per unit of scale (measured at NOISE_TRIAL_SCALE),
    ``noise_scale`` = sage's perturbation / gain, and ``noise`` is the
    perturbation of a fresh draw at that scale (the check; None where sage's
    perturbation or the gain is missing)."""
    params = [p for p in model.parameters() if p.requires_grad]
    reference = torch.cat([g.flatten().float() for g in
                           torch.autograd.grad(_loss(model, ids), params)])

    def perturbation(implementation: str, backend: str | None = None) -> float:
        try:
            model.set_attn_implementation(implementation)
            grads = torch.autograd.grad(_loss(model, ids, backend), params)
        finally:
            model.set_attn_implementation("sdpa")
        got = torch.cat([g.flatten().float() for g in grads])
        return ((got - reference).norm() / reference.norm()).item()

    out: dict[str, float | str | None] = {}
    for name, (implementation, backend) in probes.items():
        try:
            out[name] = perturbation(implementation, backend)
        except Exception as error:  # e.g. a backend that does not take this shape
            out[name] = f"{type(error).__name__}: {error}"[:300]
    if calibrate is not None and "sage" in probes:
        NOISE.generator = _noise_generator(ids.device, calibrate)
        try:
            NOISE.scale = NOISE_TRIAL_SCALE
            gain = perturbation(NOISE_IMPLEMENTATION) / NOISE_TRIAL_SCALE
            out["noise_gain"] = gain
            scale = out["sage"] / gain if isinstance(out["sage"], float) and gain > 0 else None
            out["noise_scale"] = scale
            NOISE.scale = scale or 0.0
            out["noise"] = perturbation(NOISE_IMPLEMENTATION) if scale else None
        finally:
            NOISE.scale, NOISE.generator = 0.0, None
    return out


def train(model, steps: int, backend: str | None = None,
          probes: dict[str, tuple[str, str | None]] | None = None,
          calibrate: int | None = None,
          noise: tuple[list[float], int] | None = None
          ) -> tuple[list[float], list[dict[str, float | str | None]]]:
    """``steps`` AdamW steps (lr 1e-3) on the fixed batch, float32 weights,
    bf16 autocast. Returns the losses and, with ``probes``, the gradient
    perturbations (``gradient_perturbations``, with ``calibrate`` the noise
    twins' calibration, its noise seeded by ``calibrate`` + step) at steps 0,
    PROBE_EVERY, ...

    ``backend`` pins ``scaled_dot_product_attention`` to one SDPA backend for
    the whole run (the forward is pinned; the backward is that backend's,
    recorded by autograd); None leaves torch's own choice. ``noise``
    ``(scales, seed)`` makes the run a noise twin (the model must run
    NOISE_IMPLEMENTATION): scale ``scales[step]`` at each step, the noise
    drawn from a generator seeded by ``seed`` (a noise twin has no probes)."""
    assert not (probes and noise), "a noise twin has no probes"
    model.train()
    device = next(model.parameters()).device
    ids = train_batch(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses: list[float] = []
    perturbations: list[dict[str, float | str | None]] = []
    try:
        if noise is not None:
            NOISE.generator = _noise_generator(device, noise[1])
        for step in range(steps):
            if probes and step % PROBE_EVERY == 0:
                perturbations.append({"step": step, **gradient_perturbations(
                    model, ids, probes, None if calibrate is None else calibrate + step)})
            NOISE.scale = noise[0][step] if noise is not None else 0.0
            loss = _loss(model, ids, backend)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    finally:
        NOISE.scale, NOISE.generator = 0.0, None
    return losses, perturbations


def noise_schedule(probed: list[dict[str, Any]], steps: int) -> list[float] | None:
    """The noise twins' scale at each of ``steps`` steps from the calibration
    at the probes (``noise_scale`` at each probed step): linear between
    probes, the last probe's after it. None if a probe has no scale."""
    points = [(p["step"], p.get("noise_scale")) for p in probed]
    if not points or not all(isinstance(r, float) and r > 0 for _, r in points):
        return None
    scales = []
    for step in range(steps):
        before = [(s, r) for s, r in points if s <= step][-1]
        after = next(((s, r) for s, r in points if s > step), None)
        if after is None:
            scales.append(before[1])
        else:
            t = (step - before[0]) / (after[0] - before[0])
            scales.append(before[1] + t * (after[1] - before[1]))
    return scales


def check_explain_model() -> dict[str, Any]:
    model, _ = hf_twins("llama")
    ids = train_batch()

    def forward(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(input_ids=x).logits
    explanation = torch._dynamo.explain(forward)(ids)
    ok = explanation.graph_count == 1 and explanation.graph_break_count == 0
    return {"pass": ok, "graphs": explanation.graph_count,
            "breaks": explanation.graph_break_count,
            "reasons": [str(r.reason) for r in explanation.break_reasons][:3]}


# The first steps: their largest drift is recorded for sage and for each exact
# twin, for information. It is no criterion. Until 2026-11-23 it was one (sage
# within 1% of the initial loss in the first 10 steps), kept from a check that
# cycled four batches, where the descent came later. On one memorised batch the
# steepest descent starts around step 8, and exact attention fails that 1%
# itself (2026-11-23 exact-twins record: Llama seed 2, the MATH and FLASH twins
# drift 2.73% and 3.03% in the first 10 steps; Qwen3 seed 3, MATH 1.42%). An
# absolute number is not a noise floor, and the bar (tracking_verdict) already
# covers every step, the first 10 included.
EARLY_STEPS = 10
# A single seed may exceed its bar by at most this factor (pooled_verdict).
SEED_BAR_LIMIT = 2.0


def drift(curve: list[float], reference: list[float]) -> list[float]:
    """|loss - reference loss| at every step, as a fraction of the reference's
    initial loss."""
    return [abs(a - b) / reference[0] for a, b in zip(curve, reference)]


def mean_perturbation(perturbations: list[dict[str, Any]], name: str,
                      every: int | None = None) -> float | None:
    """The mean over the probed steps (with ``every``, those at its
    multiples) of ``name``'s gradient perturbation; None if it failed at any
    of them."""
    values = [p.get(name) for p in perturbations if every is None or p["step"] % every == 0]
    if not values or not all(isinstance(v, float) for v in values):
        return None
    return sum(values) / len(values)


def tracking_verdict(sage_curve: list[float], sdpa_curve: list[float],
                     exact_curves: dict[str, list[float]],
                     perturbations: dict[str, float | None],
                     learn_bound: float) -> dict[str, Any]:
    """Does the sage twin track the SDPA twin "within the accuracy the kernels
    already have"?

    Two trainings whose attention differs by any rounding part: each step's
    small difference in the gradients changes the weights, and the next steps
    carry it on. How far the loss curves part is measured, not assumed: the
    *exact twins* (the SDPA twin's weights, data and optimizer, with SDPA
    pinned to another exact backend each, ``EXACT_TWINS``) part from the SDPA
    twin by rounding alone. Their drift is the noise floor. Sage's per-step
    perturbation is larger than rounding (8-bit Q, K, P, dO against 16-bit),
    and by how much is measured too: ``perturbations`` holds each
    implementation's relative gradient difference from the SDPA twin's at the
    SDPA twin's own weights (mean over steps 0, 10, ...; see
    ``gradient_perturbations``). To first order a training's drift grows in
    proportion to its per-step perturbation (and more slowly once it is
    large), so

        bar = max over exact twins t of  drift_t * max(1, eps_sage / eps_t)

    (drift_t: twin t's largest drift over the run; eps: mean perturbation) is
    the drift that the kernels' measured accuracy accounts for, taken at the
    largest drift per unit of perturbation that exact attention showed.

    One seed's verdict. ``invalid`` lists what makes the seed fail outright
    (pooled_verdict fails on any of them):

    * the run does not learn: the sage and SDPA twins' last losses must be
      below ``learn_bound`` (``bigram_bound`` of the batch: below it the model
      predicts from context, which only attention provides);
    * no bar: no exact twin ran with its perturbation measured, sage's
      perturbation was not measured, or every exact twin equals the SDPA twin
      bit for bit.

    ``reasons`` is ``invalid`` plus, if sage's largest drift exceeds the bar,
    by how much; ``pass`` (no reasons) is the single-seed rule, for the
    record: the check's verdict is pooled_verdict's over several seeds. The
    first ``EARLY_STEPS`` steps' largest drifts are recorded, not judged (see
    EARLY_STEPS).

    Drift at a step is |loss - SDPA twin's loss| as a fraction of the SDPA
    twin's initial loss."""
    sage_drift = drift(sage_curve, sdpa_curve)
    learns = sage_curve[-1] < learn_bound and sdpa_curve[-1] < learn_bound
    early = max(sage_drift[:EARLY_STEPS])
    eps_sage = perturbations.get("sage")
    floors: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    for name, curve in exact_curves.items():
        eps = perturbations.get(name)
        if eps is None:
            reasons.append(f"exact twin {name}: no perturbation measured")
            continue
        twin = drift(curve, sdpa_curve)
        scale = max(1.0, eps_sage / eps) if eps_sage is not None and eps > 0 else 1.0
        floors[name] = {"drift_max": max(twin), "drift_mean": sum(twin) / len(twin),
                        "drift_max_first_steps": max(twin[:EARLY_STEPS]),
                        "perturbation": eps, "scale": scale, "bar": max(twin) * scale,
                        "identical_to_sdpa": curve == sdpa_curve}
    if eps_sage is None:
        reasons.append("sage's perturbation was not measured")
    bar = max((f["bar"] for f in floors.values()), default=None) \
        if eps_sage is not None else None
    if not floors:
        reasons.append("no exact twin ran: no noise floor to compare with")
    elif bar == 0.0:
        reasons.append("every exact twin equals the SDPA twin bit for bit: no noise floor")
    out: dict[str, Any] = {
        "sage_vs_sdpa_max": max(sage_drift),
        "sage_vs_sdpa_mean": sum(sage_drift) / len(sage_drift),
        "sage_vs_sdpa_max_first_steps": early,
        "sage_final_over_initial": sage_curve[-1] / sage_curve[0],
        "sdpa_final_over_initial": sdpa_curve[-1] / sdpa_curve[0],
        "learn_bound": learn_bound, "learns": learns,
        "perturbation_sage": eps_sage, "exact_twins": floors, "bar": bar,
    }
    if bar:
        out["sage_max_over_bar"] = max(sage_drift) / bar
        noise = max(f["drift_max"] for f in floors.values())
        if noise > 0:
            out["sage_max_over_noise_max"] = max(sage_drift) / noise
    if not learns:
        reasons.append(f"does not learn: last losses sage {sage_curve[-1]:.4g}, SDPA "
                       f"{sdpa_curve[-1]:.4g}, bound {learn_bound:.4g}")
    out["invalid"] = list(reasons)
    if bar and max(sage_drift) > bar:
        reasons.append(f"drift {max(sage_drift):.2%} > bar {bar:.2%}")
    out["pass"] = not reasons
    out["reasons"] = reasons
    out["rule"] = ("one seed: last losses below the batch's bigram bound; max drift <= "
                   "max over exact twins of (twin's max drift x max(1, sage's gradient "
                   "perturbation / twin's))")
    return out


POOLED_RULE = (
    "over the seeds: at every seed the run learns (sage's and the SDPA twin's last "
    "losses below the batch's bigram bound) and has a bar (an exact twin ran, "
    "perturbations measured, not bit-identical to the SDPA twin); at no seed sage's "
    f"max drift exceeds {SEED_BAR_LIMIT:g}x that seed's bar; the sum over the seeds of "
    "sage's max drift is at most the sum of the bars. No absolute early-steps criterion "
    "(exact attention fails the old 1%-in-10-steps one).")


def _seeds_that_ran(per_seed: dict[int, dict[str, Any]], reasons: list[str]
                    ) -> Iterator[tuple[int, dict[str, Any]]]:
    """The (seed, result) pairs of ``per_seed`` whose training ran, in order,
    for the verdicts to judge; no seed at all, and each seed that raised
    (``{"error": text}``), adds its failure to ``reasons``."""
    if not per_seed:
        reasons.append("no seed ran")
    for seed, result in per_seed.items():
        if "error" in result:
            reasons.append(f"seed {seed}: {result['error']}")
            continue
        yield seed, result


def pooled_verdict(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The training check's verdict for one model over several seeds
    (TRAIN_SEEDS): ``per_seed`` maps each seed to its ``tracking_verdict``
    (with the check's extra fields), or to ``{"error": text}`` if its
    training raised.

    Why pooled. One seed measures the bar loosely: the exact twins' drift is
    one realisation of rounding noise, and at seeds 0-3 the bar varied 7x
    (3.4% to 23% for Llama). Summing over seeds averages that out, and the
    per-seed limit keeps one seed from hiding a gross excess behind the
    others. The rule (POOLED_RULE), pre-registered before any run at seeds
    4-7, PASSES if all of:

    * no seed raised, and every seed is valid (its ``invalid`` is empty: the
      run learns and a bar was measured);
    * at every seed, sage's largest drift <= SEED_BAR_LIMIT (2) x its bar;
    * sum over seeds of sage's largest drift <= sum over seeds of the bars."""
    reasons: list[str] = []
    summary: dict[int, dict[str, Any]] = {}
    for seed, result in _seeds_that_ran(per_seed, reasons):
        reasons += [f"seed {seed}: {text}" for text in result["invalid"]]
        drift_max, bar = result["sage_vs_sdpa_max"], result["bar"]
        summary[seed] = {"drift": drift_max, "bar": bar,
                         "ratio": drift_max / bar if bar else None,
                         "first_steps": result["sage_vs_sdpa_max_first_steps"],
                         "learns": result["learns"]}
        if bar and drift_max > SEED_BAR_LIMIT * bar:
            reasons.append(f"seed {seed}: drift {drift_max:.2%} > {SEED_BAR_LIMIT:g}x bar "
                           f"{bar:.2%} ({drift_max / bar:.2f}x)")
    out: dict[str, Any] = {"seeds": list(per_seed), "seed_summary": summary}
    if per_seed and len(summary) == len(per_seed) and all(s["bar"] for s in summary.values()):
        drifts = sum(s["drift"] for s in summary.values())
        bars = sum(s["bar"] for s in summary.values())
        out.update(pooled_drift=drifts, pooled_bar=bars, pooled_ratio=drifts / bars,
                   max_seed_ratio=max(s["ratio"] for s in summary.values()))
        if drifts > bars:
            reasons.append(f"pooled over seeds {', '.join(map(str, per_seed))}: drifts sum "
                           f"to {drifts:.2%} > bars' {bars:.2%} ({drifts / bars:.2f}x)")
    out["pass"] = not reasons
    out["reasons"] = reasons
    out["rule"] = POOLED_RULE
    return out


# The noise-twin criterion: pre-registered on 2026-11-23 before any run of it
# (and before any run at seeds 8-11). See calibrated_verdict for the reasons
# behind the two limits.
NOISE_SEED_LIMIT = 2.0
NOISE_POOLED_LIMIT = 1.75
CALIBRATED_RULE = (
    "over the seeds (8, 9, 10, 11, never run before): at every seed (a) every run "
    "learns: sage's, the SDPA twin's and every noise twin's last loss is below the "
    "batch's bigram bound; (b) the noise twins are sound: all "
    f"{NOISE_TWINS} ran (the SDPA twin with Gaussian noise added to dQ, dK, dV, its "
    "relative L2 size calibrated at every probe (steps 0, 5, ..., 45) so that the "
    "parameter-gradient perturbation equals sage's there, interpolated between "
    "probes), none equals the SDPA twin bit for bit, and a fresh draw at the "
    "calibrated scales perturbs the gradient, on average over the probes, "
    f"{CALIBRATION_BOUNDS[0]:g}x to {CALIBRATION_BOUNDS[1]:g}x as much as sage; "
    f"(c) sage's max drift is at most {NOISE_SEED_LIMIT:g}x the largest max drift "
    "of that seed's noise twins. Over the seeds: the sum of sage's max drifts is at "
    f"most {NOISE_POOLED_LIMIT:g}x the sum over the seeds of the noise twins' median "
    "max drift. Drift: |loss - SDPA twin's loss| / SDPA twin's initial loss. The "
    "exact twins and the pooled rule of 2026-11-23 are reported, not judged.")


def noise_twin_summary(sage_curve: list[float], sdpa_curve: list[float],
                       noise_curves: dict[int, list[float] | str], learn_bound: float,
                       probed: list[dict[str, Any]], expected: int,
                       no_twins: str | None = None) -> dict[str, Any]:
    """One seed of the noise-twin criterion (CALIBRATED_RULE): sage's
    largest drift against the noise twins' (``noise_curves``: noise seed ->
    the twin's losses, or its error text), the learning bound, the
    calibration (``probed``: the SDPA twin's probes with ``sage``, ``noise``
    and ``noise_scale``). ``invalid`` lists what fails the seed outright
    (``no_twins`` says why no noise twin ran, if none did); the comparison of
    the drifts is calibrated_verdict's."""
    invalid: list[str] = []
    sage_drift = drift(sage_curve, sdpa_curve)
    if not (sage_curve[-1] < learn_bound and sdpa_curve[-1] < learn_bound):
        invalid.append(f"does not learn: last losses sage {sage_curve[-1]:.4g}, SDPA "
                       f"{sdpa_curve[-1]:.4g}, bound {learn_bound:.4g}")
    eps_sage = mean_perturbation(probed, "sage")
    eps_noise = mean_perturbation(probed, "noise")
    ratio = eps_noise / eps_sage if eps_sage and eps_noise is not None else None
    scales = [p.get("noise_scale") for p in probed]
    if no_twins:
        invalid.append(f"no noise twin ran: {no_twins}")
    elif ratio is None:
        invalid.append("calibration failed: sage's or the noise twins' perturbation "
                       "was not measured at every probe")
    elif not CALIBRATION_BOUNDS[0] <= ratio <= CALIBRATION_BOUNDS[1]:
        invalid.append(f"calibration off: the noise perturbs the gradient {ratio:.2f}x as "
                       f"much as sage (bounds {CALIBRATION_BOUNDS[0]:g}-"
                       f"{CALIBRATION_BOUNDS[1]:g})")
    twins: dict[int, dict[str, Any]] = {}
    for seed, curve in noise_curves.items():
        if isinstance(curve, str):
            invalid.append(f"noise twin {seed}: {curve}")
            continue
        d = drift(curve, sdpa_curve)
        twins[seed] = {"drift_max": max(d), "drift_max_step": d.index(max(d)),
                       "drift_mean": sum(d) / len(d), "final": curve[-1],
                       "learns": curve[-1] < learn_bound,
                       "identical_to_sdpa": curve == sdpa_curve}
        if not twins[seed]["learns"]:
            invalid.append(f"noise twin {seed} does not learn: last loss {curve[-1]:.4g}, "
                           f"bound {learn_bound:.4g}")
        if twins[seed]["identical_to_sdpa"]:
            invalid.append(f"noise twin {seed} equals the SDPA twin bit for bit")
    if not no_twins and len(noise_curves) < expected:
        invalid.append(f"only {len(noise_curves)} of {expected} noise twins ran")
    drifts = sorted(t["drift_max"] for t in twins.values())
    out: dict[str, Any] = {
        "sage_drift_max": max(sage_drift), "sage_drift_max_step": sage_drift.index(
            max(sage_drift)), "learn_bound": learn_bound,
        "perturbation_sage": eps_sage, "perturbation_noise": eps_noise,
        "calibration_ratio": ratio, "noise_scales": scales,
        "twins": twins, "invalid": invalid}
    if drifts:
        median = (drifts[(len(drifts) - 1) // 2] + drifts[len(drifts) // 2]) / 2
        out.update(noise_drift_max_max=drifts[-1], noise_drift_max_median=median,
                   noise_drift_max_min=drifts[0],
                   sage_over_noise_max=max(sage_drift) / drifts[-1] if drifts[-1] else None,
                   sage_over_noise_median=max(sage_drift) / median if median else None,
                   # For the record: how many noise twins drift less than sage.
                   noise_twins_below_sage=sum(d < max(sage_drift) for d in drifts))
    return out


def calibrated_verdict(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The training check's verdict for one model over several seeds
    (TRAIN_SEEDS), by the noise twins (CALIBRATED_RULE): ``per_seed`` maps
    each seed to its check_training_seed result (``noise_twins`` holds
    noise_twin_summary's), or to ``{"error": text}`` if its training raised.

    Why this rule. The exact twins' bar extrapolated their drift linearly
    to sage's larger perturbation, and a training's drift is far from
    linear in it (chaotic dynamics, heavy-tailed drifts: one sample per seed
    against an extrapolated bar). The noise twins measure the drift that
    random errors of sage's own size cause, at sage's size, several times per
    seed. PASS if all of:

    * no seed raised; every seed is valid (noise_twin_summary's ``invalid``
      is empty: every run learns, every noise twin ran, differs from the
      SDPA twin, and the calibration check holds);
    * at every seed, sage's largest drift <= NOISE_SEED_LIMIT (2) x the
      largest of the noise twins';
    * sum over seeds of sage's largest drift <= NOISE_POOLED_LIMIT (1.75) x
      the sum over seeds of the noise twins' median largest drift.

    The limits, chosen before any run by simulation: a twin's largest drift
    taken as log-normal with spread sigma around a per-seed level (across
    seeds 0-7 the log spread of sage's and the exact twins' largest drifts
    was 0.44-0.61, seed-to-seed differences included), 6 noise twins, 4
    seeds. If sage's drift is one more draw from its noise twins'
    distribution, P(PASS) is 0.99 at sigma 0.3, 0.94 at 0.45 and 0.86 at
    0.6; if sage drifts 2x as far as its noise twins, 0.17, 0.22 and 0.24;
    3x as far, 0.00, 0.01 and 0.03. The median sum needs a factor above 1:
    one draw per seed of a right-skewed drift sums, on average, above the
    medians, and sage has one draw per seed (it is deterministic). With
    (2, 1.5) a sage like its noise twins would fail 2-21% of the time, with
    (2, 2) one drifting 2x as far would pass about 35%."""
    reasons: list[str] = []
    summary: dict[int, dict[str, Any]] = {}
    for seed, result in _seeds_that_ran(per_seed, reasons):
        noise = result["noise_twins"]
        reasons += [f"seed {seed}: {text}" for text in noise["invalid"]]
        sage, largest = noise["sage_drift_max"], noise.get("noise_drift_max_max")
        summary[seed] = {"drift": sage, "noise_max": largest,
                         "noise_median": noise.get("noise_drift_max_median"),
                         "ratio_max": noise.get("sage_over_noise_max"),
                         "ratio_median": noise.get("sage_over_noise_median"),
                         "calibration_ratio": noise["calibration_ratio"],
                         "valid": not noise["invalid"]}
        if largest is not None and sage > NOISE_SEED_LIMIT * largest:
            reasons.append(f"seed {seed}: drift {sage:.2%} > {NOISE_SEED_LIMIT:g}x the "
                           f"largest noise twin's {largest:.2%} ({sage / largest:.2f}x)")
    out: dict[str, Any] = {"seeds": list(per_seed), "seed_summary": summary}
    if per_seed and len(summary) == len(per_seed) and \
            all(s["noise_median"] for s in summary.values()):
        drifts = sum(s["drift"] for s in summary.values())
        medians = sum(s["noise_median"] for s in summary.values())
        out.update(pooled_drift=drifts, pooled_noise_median=medians,
                   pooled_ratio=drifts / medians,
                   max_seed_ratio=max(s["ratio_max"] for s in summary.values()))
        if drifts > NOISE_POOLED_LIMIT * medians:
            reasons.append(f"pooled over seeds {', '.join(map(str, per_seed))}: sage's "
                           f"drifts sum to {drifts:.2%} > {NOISE_POOLED_LIMIT:g}x the noise "
                           f"twins' medians' {medians:.2%} ({drifts / medians:.2f}x)")
    out["pass"] = not reasons
    out["reasons"] = reasons
    out["rule"] = CALIBRATED_RULE
    return out


def sdpa_kernels_used(model) -> list[str]:
    """Names of the attention kernels one fwd+bwd of ``model`` launches under
    torch's own SDPA choice (to say which backend the SDPA twin ran)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        ids = train_batch()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            torch.cuda.synchronize()
        model.zero_grad(set_to_none=True)
        keys = ("flash", "fmha", "cudnn", "attention", "sdpa", "mem_eff")
        names = {e.key for e in prof.key_averages() if any(k in e.key.lower() for k in keys)}
        return sorted(n[:120] for n in names)[:6]
    except Exception as error:  # informational only
        return [f"unknown ({type(error).__name__}: {error})"[:200]]


def check_training(kind: str, steps: int, seeds=None, noise_twins: int | None = None
                   ) -> dict[str, Any]:
    """The training check at each of ``seeds`` (default TRAIN_SEEDS) with
    ``noise_twins`` (default NOISE_TWINS) noise twins each, judged by
    calibrated_verdict; each seed's own result is under ``per_seed``, and
    the exact twins' pooled verdict (the rule of 2026-11-23, for the record)
    under ``exact_twins_pooled`` (in short: ``exact_twins_rule``)."""
    per_seed: dict[int, dict[str, Any]] = {}
    for i, seed in enumerate(TRAIN_SEEDS if seeds is None else seeds):
        with seeded(seed):
            try:
                per_seed[seed] = check_training_seed(kind, steps, profile=i == 0,
                                                     noise_twins=noise_twins)
            except Exception as error:  # one seed's crash is that seed's FAIL
                per_seed[seed] = {"error": f"{type(error).__name__}: {error}"[:600],
                                  "trace": traceback.format_exc()[-1500:]}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    old = pooled_verdict(per_seed)
    return {**calibrated_verdict(per_seed),
            "exact_twins_rule": {k: old.get(k) for k in
                                 ("pass", "reasons", "pooled_ratio", "max_seed_ratio")},
            "exact_twins_pooled": old, "per_seed": per_seed}


def check_training_seed(kind: str, steps: int, profile: bool = True,
                        noise_twins: int | None = None) -> dict[str, Any]:
    """One seed (SEED) of the training check: every twin trained (sage, the
    SDPA twin, the exact twins, ``noise_twins`` noise twins), the
    perturbations probed and the noise calibrated along the SDPA twin's
    trajectory; tracking_verdict's numbers (the exact twins' bar, for the
    record) at the top, noise_twin_summary's under ``noise_twins``."""
    register_noise_twin()
    count = NOISE_TWINS if noise_twins is None else noise_twins
    models = hf_models(kind, 3 + len(EXACT_TWINS))
    sage_model, sdpa_model = models[0], models[1]
    exact_models, noise_model = models[2:-1], models[-1]
    initial = {k: v.detach().clone() for k, v in noise_model.state_dict().items()}
    # Which kernels torch's SDPA choice runs, measured on a throwaway copy so
    # that the twins' weights stay untouched (the first seed only: the same
    # shapes at every seed).
    kernels: list[str] = []
    if profile:
        probe = hf_twins(kind)[1]
        kernels = sdpa_kernels_used(probe)
        del probe
    sage_curve, _ = train(sage_model, steps)
    # The SDPA twin (torch's choice: cuDNN's fused kernel on the H100); along
    # its trajectory, the per-step perturbation of sage and of each exact twin.
    # "sdpa_repeat" recomputes the reference itself: its own run-to-run
    # difference (0 if the backend is deterministic), for the record only.
    # The noise twins are calibrated at the same probes.
    probes = {"sage": ("sage", None), "sdpa_repeat": ("sdpa", None),
              **{name: ("sdpa", name) for name in EXACT_TWINS}}
    sdpa_curve, probed = train(sdpa_model, steps, probes=probes, calibrate=1000 * SEED + 500)
    exact_curves: dict[str, list[float]] = {}
    failed: dict[str, str] = {}
    for name, model in zip(EXACT_TWINS, exact_models):
        try:
            exact_curves[name] = train(model, steps, backend=name)[0]
        except Exception as error:  # a backend that does not run here: no twin
            failed[name] = f"{type(error).__name__}: {error}"[:300]
    # The noise twins: noise seeds 1000 * SEED + 1, ... (the calibration's are
    # 1000 * SEED + 500 + step).
    schedule = noise_schedule(probed, steps)
    noise_curves: dict[int, list[float] | str] = {}
    if schedule is not None:
        noise_model.set_attn_implementation(NOISE_IMPLEMENTATION)
        for j in range(1, count + 1):
            noise_model.load_state_dict(initial)
            try:
                noise_curves[1000 * SEED + j] = train(noise_model, steps,
                                                      noise=(schedule, 1000 * SEED + j))[0]
            except Exception as error:  # that twin's error, named by the summary
                noise_curves[1000 * SEED + j] = f"{type(error).__name__}: {error}"[:300]
    # The exact twins' bar keeps its 2026-11-23 definition (probes at 0, 10, ...).
    perturbations = {name: mean_perturbation(probed, name, BAR_EVERY) for name in probes}
    bound = bigram_bound(train_batch())
    verdict = tracking_verdict(sage_curve, sdpa_curve, exact_curves, perturbations, bound)
    noise = noise_twin_summary(
        sage_curve, sdpa_curve, noise_curves, bound, probed, count,
        None if schedule is not None else "the calibration has no scale at every probe")
    picks = sorted({0, 1, 4, 9, 14, 19, 24, 29, 39, steps - 1} & set(range(steps)))
    return {**verdict, "seed": SEED, "noise_twins": noise,
            "noise_schedule": schedule,
            "exact_twins_failed": failed,
            "sdpa_twin_kernels": kernels,
            "steps_shown": picks,
            "sage": [round(sage_curve[i], 4) for i in picks],
            "sdpa": [round(sdpa_curve[i], 4) for i in picks],
            **{f"exact_{name}": [round(curve[i], 4) for i in picks]
               for name, curve in exact_curves.items()},
            "perturbations_per_step": probed,
            "curves": {"sage": sage_curve, "sdpa": sdpa_curve, **exact_curves,
                       **{f"noise_{j}": c for j, c in noise_curves.items()
                          if not isinstance(c, str)}}}


def check_generate(kind: str, steps: int) -> dict[str, Any]:
    """Greedy decoding (KV cache: one query, many keys) with the same weights,
    trained first under SDPA on the training batch so that the continuation
    of a training prompt is not a tie; tokens must agree until the first near
    tie."""
    sage_model, sdpa_model = hf_twins(kind)
    train(sdpa_model, steps)
    sage_model.load_state_dict(sdpa_model.state_dict())
    prompt = train_batch()[:1, :32]
    outs = []
    for model in (sage_model, sdpa_model):
        model.eval()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            outs.append(model.generate(prompt, max_new_tokens=12, do_sample=False,
                                       output_logits=True, return_dict_in_generate=True,
                                       pad_token_id=0))
    tokens = [o.sequences[0, 32:].tolist() for o in outs]
    compared = 0
    for got_logits, want_logits, got, want in zip(outs[0].logits, outs[1].logits, *tokens):
        error = (got_logits - want_logits)[0].float().abs()
        best = want_logits[0].argmax()
        margin = (want_logits[0, best] - want_logits[0]).float()
        margin[best] = float("inf")
        if bool((margin <= error + error[best]).any()):
            break
        if got != want:
            return {"pass": False, "sage": tokens[0], "sdpa": tokens[1], "compared": compared}
        compared += 1
    return {"pass": compared >= 1, "sage": tokens[0], "sdpa": tokens[1],
            "agree_until_first_near_tie": compared, "identical": tokens[0] == tokens[1]}


# --- memory -------------------------------------------------------------------


def peak_mib(fn: Callable, q, k, v, do) -> float:
    """Peak memory of one fwd+bwd above what the inputs (q, k, v, dO) hold."""
    fwd_bwd(fn, q, k, v, do)  # compile, cuDNN plans, allocator warm
    for x in (q, k, v):
        x.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    o = fn(q, k, v)
    o.backward(do)
    del o
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def check_memory(d: int) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = inputs(b=1, h=16, hkv=16, n=16384, n_kv=16384, d=d, layout="bhsd")
    do = torch.randn_like(q)

    def cudnn(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    sage_peak = peak_mib(lambda q, k, v: sage.attention(q, k, v, causal=True), q, k, v, do)
    cudnn_peak = peak_mib(cudnn, q, k, v, do)
    ratio = sage_peak / cudnn_peak
    return {"pass": ratio <= 1.2, "sage_mib": sage_peak, "cudnn_mib": cudnn_peak,
            "ratio": ratio}


# ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path)
    parser.add_argument("md", type=Path)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--only", default="", help="comma-separated check names")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the transformers models' weights and batch in the "
                             "explain and generate checks")
    parser.add_argument("--seeds", default=",".join(map(str, TRAIN_SEEDS)),
                        help="comma-separated seeds of the training check, judged pooled "
                             "(default: the pre-registered 8,9,10,11)")
    parser.add_argument("--noise-twins", type=int, default=NOISE_TWINS,
                        help="noise twins per model and seed (default: the pre-registered "
                             f"{NOISE_TWINS})")
    args = parser.parse_args()
    global SEED
    SEED = args.seed
    seeds = [int(s) for s in args.seeds.split(",") if s]
    sage_hf.register()
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "opcheck": check_opcheck,
        "explain (function)": check_explain_function,
        "compile (inductor, fullgraph)": lambda: check_compile(None),
        "compile (reduce-overhead)": lambda: check_compile("reduce-overhead"),
        "cuda-graph (manual capture)": check_cuda_graph,
        "explain (tiny Llama)": check_explain_model,
        "train llama (sage vs sdpa, noise twins, pooled seeds)":
            lambda: check_training("llama", args.steps, seeds, args.noise_twins),
        "train qwen3 (sage vs sdpa, noise twins, pooled seeds)":
            lambda: check_training("qwen3", args.steps, seeds, args.noise_twins),
        "generate llama": lambda: check_generate("llama", args.steps),
        "generate qwen3": lambda: check_generate("qwen3", args.steps),
        "memory d=128": lambda: check_memory(128),
        "memory d=64": lambda: check_memory(64),
    }
    only = [s for s in args.only.split(",") if s]
    results: dict[str, Any] = {"environment": environment(), "sage": sage.__version__,
                               "seed": SEED, "train_seeds": seeds,
                               "noise_twins": args.noise_twins,
                               "sage_path": str(Path(sage.__file__).parent), "checks": {}}
    for name, check in checks.items():
        if only and not any(s in name for s in only):
            continue
        start = time.time()
        try:
            result = check()
        except Exception as error:  # one failing check must not hide the others
            result = {"pass": False, "error": f"{type(error).__name__}: {error}"[:600],
                      "trace": traceback.format_exc()[-1500:]}
        result["seconds"] = round(time.time() - start, 1)
        results["checks"][name] = result
        print(f"{name}: {'PASS' if result['pass'] else 'FAIL'} "
              f"{json.dumps({k: v for k, v in result.items() if k not in QUIET}, default=str)}",
              flush=True)
        torch.cuda.empty_cache()
    rows = [(name, "PASS" if r["pass"] else "FAIL",
             json.dumps({k: v for k, v in r.items() if k not in QUIET + ("pass",)},
                        default=str)[:300])
            for name, r in results["checks"].items()]
    markdown = markdown_table(["check", "result", "numbers"], rows, [False, False, False])
    write_outputs(args.json, args.md, results, markdown)
    print(markdown)
    return 0 if all(r["pass"] for r in results["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
