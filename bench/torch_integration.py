"""sage in the PyTorch ecosystem, on the GPU: torch.compile, CUDA graphs,
Hugging Face transformers, peak memory. One run, every check, one table.

    python3 bench/torch_integration.py OUT.json OUT.md [--steps 50] [--only NAMES]
        [--seed 0] [--seeds 4,5,6,7]

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
  at each of several seeds (``--seeds``, default 4-7): every run must learn
  (end below the batch's bigram bound, which only attention can beat), and
  sage's loss drift must stay within the noise floor that the *exact twins*
  (SDPA pinned to its math, flash and efficient backends) measure, scaled by
  how much more sage perturbs each step's gradient, pooled over the seeds
  (see ``bigram_bound``, ``gradient_perturbations``, ``tracking_verdict``
  and ``pooled_verdict``);
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
QUIET = ("trace", "curves", "rule", "perturbations_per_step", "per_seed")


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
# The training check's seeds (--seeds), pre-registered on 2026-11-23 before
# any run at them: seeds 0-3 had been run (2026-11-23 exact-twins record) and
# their outcomes were known, so they are not part of the verdict.
TRAIN_SEEDS = (4, 5, 6, 7)


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
# gradient_perturbations): every PROBE_EVERY steps from step 0.
PROBE_EVERY = 10


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


def gradient_perturbations(model, ids: torch.Tensor, probes: dict[str, tuple[str, str | None]]
                           ) -> dict[str, float | str]:
    """How much each attention implementation perturbs one training step.

    At ``model``'s current weights (an SDPA model: the SDPA twin during its
    training), the gradient of the loss on ``ids`` under torch's own SDPA
    choice is the reference; each probe ``name: (attn_implementation,
    SDPBackend name or None)`` recomputes it with that attention, and its
    perturbation is the relative L2 difference of all parameter gradients
    from the reference. Nothing is written to ``.grad`` (the optimizer's
    state is untouched). A probe that cannot run gives its error text."""
    params = [p for p in model.parameters() if p.requires_grad]
    reference = torch.cat([g.flatten().float() for g in
                           torch.autograd.grad(_loss(model, ids), params)])
    out: dict[str, float | str] = {}
    for name, (implementation, backend) in probes.items():
        try:
            model.set_attn_implementation(implementation)
            grads = torch.autograd.grad(_loss(model, ids, backend), params)
            got = torch.cat([g.flatten().float() for g in grads])
            out[name] = ((got - reference).norm() / reference.norm()).item()
        except Exception as error:  # e.g. a backend that does not take this shape
            out[name] = f"{type(error).__name__}: {error}"[:300]
        finally:
            model.set_attn_implementation("sdpa")
    return out


def train(model, steps: int, backend: str | None = None,
          probes: dict[str, tuple[str, str | None]] | None = None
          ) -> tuple[list[float], list[dict[str, float | str]]]:
    """``steps`` AdamW steps (lr 1e-3) on the fixed batch, float32 weights,
    bf16 autocast. Returns the losses and, with ``probes``, the gradient
    perturbations (``gradient_perturbations``) at steps 0, PROBE_EVERY, ...

    ``backend`` pins ``scaled_dot_product_attention`` to one SDPA backend for
    the whole run (the forward is pinned; the backward is that backend's,
    recorded by autograd); None leaves torch's own choice."""
    model.train()
    device = next(model.parameters()).device
    ids = train_batch(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses: list[float] = []
    perturbations: list[dict[str, float | str]] = []
    for step in range(steps):
        if probes and step % PROBE_EVERY == 0:
            perturbations.append({"step": step, **gradient_perturbations(model, ids, probes)})
        loss = _loss(model, ids, backend)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, perturbations


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


def mean_perturbation(perturbations: list[dict[str, float | str]], name: str) -> float | None:
    """The mean over the probed steps of ``name``'s gradient perturbation;
    None if it failed at any of them."""
    values = [p[name] for p in perturbations]
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
    if not per_seed:
        reasons.append("no seed ran")
    for seed, result in per_seed.items():
        if "error" in result:
            reasons.append(f"seed {seed}: {result['error']}")
            continue
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


def check_training(kind: str, steps: int, seeds=None) -> dict[str, Any]:
    """The training check at each of ``seeds`` (default TRAIN_SEEDS), judged
    by pooled_verdict; each seed's own result is under ``per_seed``."""
    per_seed: dict[int, dict[str, Any]] = {}
    for i, seed in enumerate(TRAIN_SEEDS if seeds is None else seeds):
        with seeded(seed):
            try:
                per_seed[seed] = check_training_seed(kind, steps, profile=i == 0)
            except Exception as error:  # one seed's crash is that seed's FAIL
                per_seed[seed] = {"error": f"{type(error).__name__}: {error}"[:600],
                                  "trace": traceback.format_exc()[-1500:]}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {**pooled_verdict(per_seed), "per_seed": per_seed}


def check_training_seed(kind: str, steps: int, profile: bool = True) -> dict[str, Any]:
    """One seed (SEED) of the training check: every twin trained, the
    perturbations probed, tracking_verdict's numbers."""
    models = hf_models(kind, 2 + len(EXACT_TWINS))
    sage_model, sdpa_model, exact_models = models[0], models[1], models[2:]
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
    probes = {"sage": ("sage", None), "sdpa_repeat": ("sdpa", None),
              **{name: ("sdpa", name) for name in EXACT_TWINS}}
    sdpa_curve, probed = train(sdpa_model, steps, probes=probes)
    exact_curves: dict[str, list[float]] = {}
    failed: dict[str, str] = {}
    for name, model in zip(EXACT_TWINS, exact_models):
        try:
            exact_curves[name] = train(model, steps, backend=name)[0]
        except Exception as error:  # a backend that does not run here: no twin
            failed[name] = f"{type(error).__name__}: {error}"[:300]
    perturbations = {name: mean_perturbation(probed, name) for name in probes}
    bound = bigram_bound(train_batch())
    verdict = tracking_verdict(sage_curve, sdpa_curve, exact_curves, perturbations, bound)
    picks = sorted({0, 1, 4, 9, 14, 19, 24, 29, 39, steps - 1} & set(range(steps)))
    return {**verdict, "seed": SEED,
            "exact_twins_failed": failed,
            "sdpa_twin_kernels": kernels,
            "steps_shown": picks,
            "sage": [round(sage_curve[i], 4) for i in picks],
            "sdpa": [round(sdpa_curve[i], 4) for i in picks],
            **{f"exact_{name}": [round(curve[i], 4) for i in picks]
               for name, curve in exact_curves.items()},
            "perturbations_per_step": probed,
            "curves": {"sage": sage_curve, "sdpa": sdpa_curve, **exact_curves}}


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
                             "(default: the pre-registered 4,5,6,7)")
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
        "train llama (sage vs sdpa, exact twins, pooled seeds)":
            lambda: check_training("llama", args.steps, seeds),
        "train qwen3 (sage vs sdpa, exact twins, pooled seeds)":
            lambda: check_training("qwen3", args.steps, seeds),
        "generate llama": lambda: check_generate("llama", args.steps),
        "generate qwen3": lambda: check_generate("qwen3", args.steps),
        "memory d=128": lambda: check_memory(128),
        "memory d=64": lambda: check_memory(64),
    }
    only = [s for s in args.only.split(",") if s]
    results: dict[str, Any] = {"environment": environment(), "sage": sage.__version__,
                               "seed": SEED, "train_seeds": seeds,
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
