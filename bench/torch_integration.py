"""sage in the PyTorch ecosystem, on the GPU: torch.compile, CUDA graphs,
Hugging Face transformers, peak memory. One run, every check, one table.

    python3 bench/torch_integration.py OUT.json OUT.md [--steps 50] [--quick]

Checks (each PASS/FAIL with its numbers):

* ``opcheck``: ``torch.library.opcheck`` of ``sage::attention_fwd``/``_bwd`` on CUDA;
* ``explain``: ``torch._dynamo.explain`` of a function calling ``sage.attention``
  and of a whole tiny transformers model: one graph, no break;
* ``compile``: ``torch.compile`` (inductor) fwd+bwd vs eager;
* ``reduce-overhead``: the same with CUDA graphs, no cudagraph skips;
* ``cuda-graph``: a manual ``torch.cuda.graph`` capture of fwd+bwd, replayed on
  new inputs vs eager on them; nothing compiled during the capture;
* ``llama``/``qwen3`` training: 50 steps with ``attn_implementation="sage"`` vs
  the SDPA twin (same weights, same data), loss curves, against a measured noise
  floor: a third twin, the *noise twin*, runs SDPA pinned to its math backend
  (see ``train`` and ``tracking_verdict`` for what it is and the pass rule);
* ``generate``: greedy tokens vs SDPA's until the first near tie;
* ``memory``: peak memory of fwd+bwd vs cuDNN SDPA at B1 H16 N16K, D 64 and 128.

It uses the *installed* package (scripts/gpu/run.sh stage ``package``
installs it without network and runs this from outside the checkout).
"""

from __future__ import annotations

import argparse
import json
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
QUIET = ("trace", "curves", "rule")  # in the JSON, not in the printed lines


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
    common = dict(vocab_size=512, hidden_size=512, intermediate_size=1024,
                  num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                  head_dim=64, max_position_embeddings=1024, attention_dropout=0.0)
    return transformers.LlamaConfig(**common) if kind == "llama" \
        else transformers.Qwen3Config(**common)


def hf_twins(kind: str, noise_twin: bool = False):
    """The same random float32 weights under "sage" and "sdpa" attention (and,
    with ``noise_twin``, a second "sdpa" copy for the noise floor)."""
    import transformers
    torch.manual_seed(0)
    sage_model = transformers.AutoModelForCausalLM.from_config(
        hf_config(kind), attn_implementation="sage").to(DEVICE)
    sdpa_model = transformers.AutoModelForCausalLM.from_config(
        hf_config(kind), attn_implementation="sdpa").to(DEVICE)
    sdpa_model.load_state_dict(sage_model.state_dict())
    if not noise_twin:
        return sage_model, sdpa_model
    noise_model = transformers.AutoModelForCausalLM.from_config(
        hf_config(kind), attn_implementation="sdpa").to(DEVICE)
    noise_model.load_state_dict(sage_model.state_dict())
    return sage_model, sdpa_model, noise_model


def batch(step: int, n: int = 256, b: int = 4) -> torch.Tensor:
    """Learnable data: a fixed pool of 4 batches of random tokens, cycled (the
    models memorise them, so the loss falls)."""
    gen = torch.Generator().manual_seed(step % 4)
    return torch.randint(0, 512, (b, n), generator=gen).to(DEVICE)


def train(model, steps: int, sdpa_backend=None) -> list[float]:
    """``steps`` AdamW steps, float32 weights, bf16 autocast (attention runs in bf16).

    ``sdpa_backend`` pins ``scaled_dot_product_attention`` to one backend for the
    whole run (the forward is pinned; the backward is that backend's, recorded by
    autograd); None leaves torch's own choice."""
    import contextlib
    from torch.nn.attention import sdpa_kernel
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        ids = batch(step)
        pin = sdpa_kernel(sdpa_backend) if sdpa_backend is not None \
            else contextlib.nullcontext()
        with pin, torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def check_explain_model() -> dict[str, Any]:
    model, _ = hf_twins("llama")
    ids = batch(0)

    def forward(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(input_ids=x).logits
    explanation = torch._dynamo.explain(forward)(ids)
    ok = explanation.graph_count == 1 and explanation.graph_break_count == 0
    return {"pass": ok, "graphs": explanation.graph_count,
            "breaks": explanation.graph_break_count,
            "reasons": [str(r.reason) for r in explanation.break_reasons][:3]}


# The tracking rule (see tracking_verdict): sage passes if its drift from the
# SDPA twin stays within TRACK_ABS of the initial loss at every step (the
# original bar), or within NOISE_FACTOR times the drift of the noise twin.
TRACK_ABS = 0.03
NOISE_FACTOR = 2.0
EARLY_STEPS = 10      # the first steps, before chaotic amplification ...
EARLY_ABS = 0.01      # ... must agree within 1% of the initial loss regardless


def drift(curve: list[float], reference: list[float]) -> list[float]:
    """|loss - reference loss| at every step, as a fraction of the reference's
    initial loss."""
    return [abs(a - b) / reference[0] for a, b in zip(curve, reference)]


def tracking_verdict(sage_curve: list[float], sdpa_curve: list[float],
                     noise_curve: list[float] | None) -> dict[str, Any]:
    """Does the sage twin track the SDPA twin "within the accuracy the kernels
    already have"?

    Two trainings that differ by any rounding diverge: each step's tiny
    difference in the gradients changes the weights, later batches amplify it,
    and after a few dozen AdamW steps on memorised data the loss curves part by
    percents. The size of that late gap is set mostly by the amplification, not
    by the size of the seed perturbation, so a fixed 3% bar says little by
    itself. The noise twin measures it: the same weights and data with SDPA
    computed by another, equally exact path (its math backend; see
    ``check_training``), so its drift from the SDPA twin is what rounding
    alone produces in this training.

    PASS requires all of:

    * the model trains (the sage twin's last loss < half its first);
    * the first ``EARLY_STEPS`` steps agree within ``EARLY_ABS`` (1%) of the
      initial loss: before amplification, sage's own error must be small;
    * at every step sage's drift <= ``TRACK_ABS`` (3%) of the initial loss (the
      original rule), OR sage's largest drift <= ``NOISE_FACTOR`` (2x) the
      noise twin's largest drift. The factor 2: sage's per-step perturbation
      is genuinely larger than rounding (8-bit Q, K, P, dO against 16-bit), so
      its curve starts to part a few steps earlier and reaches a somewhat
      larger gap; and each drift is one realisation of a chaotic process (one
      pair of runs), whose largest gap varies between realisations by about
      this much. A drift within 2x of pure rounding noise means the kernels'
      error is not what dominates the divergence. A drift beyond both bars
      fails.

    If the noise twin's curve equals the SDPA twin's bit for bit (both ran the
    same path), there is no floor and only the 3% rule applies."""
    sage_drift = drift(sage_curve, sdpa_curve)
    trains = sage_curve[-1] < 0.5 * sage_curve[0]
    early = max(sage_drift[:EARLY_STEPS])
    within_abs = max(sage_drift) <= TRACK_ABS
    out: dict[str, Any] = {
        "sage_vs_sdpa_max": max(sage_drift),
        "sage_vs_sdpa_mean": sum(sage_drift) / len(sage_drift),
        "sage_vs_sdpa_max_first_steps": early,
        "trains": trains, "within_3pct": within_abs,
    }
    within_noise = False
    if noise_curve is not None:
        noise_drift = drift(noise_curve, sdpa_curve)
        floor = max(noise_drift)
        out.update({"noise_vs_sdpa_max": floor,
                    "noise_vs_sdpa_mean": sum(noise_drift) / len(noise_drift),
                    "noise_identical_to_sdpa": noise_curve == sdpa_curve})
        if floor > 0:
            out["sage_max_over_noise_max"] = max(sage_drift) / floor
            within_noise = max(sage_drift) <= NOISE_FACTOR * floor
    out["within_2x_noise"] = within_noise
    out["pass"] = trains and early <= EARLY_ABS and (within_abs or within_noise)
    out["rule"] = (f"trains; first {EARLY_STEPS} steps within {EARLY_ABS:.0%}; every step "
                   f"within {TRACK_ABS:.0%} of the initial loss, or sage's max drift <= "
                   f"{NOISE_FACTOR:g}x the noise twin's (SDPA math backend) max drift")
    return out


def sdpa_kernels_used(model) -> list[str]:
    """Names of the attention kernels one fwd+bwd of ``model`` launches under
    torch's own SDPA choice (to say which backend the SDPA twin ran)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        ids = batch(0)
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


def check_training(kind: str, steps: int) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend
    sage_model, sdpa_model, noise_model = hf_twins(kind, noise_twin=True)
    # Which kernels torch's SDPA choice runs, measured on a throwaway copy so
    # that the twins' weights stay untouched.
    probe = hf_twins(kind)[1]
    kernels = sdpa_kernels_used(probe)
    del probe
    sage_curve = train(sage_model, steps)
    sdpa_curve = train(sdpa_model, steps)  # torch's choice: a fused kernel on the H100
    # The noise twin: SDPA pinned to its math backend. With the default
    # allow_fp16_bf16_reduction_math_sdp(False) the math backend takes the same
    # bf16 q, k, v, computes QK^T, the softmax and PV in float32 with explicit
    # (unfused) matmuls and rounds O to bf16 once; the fused kernels use an
    # online softmax in blocks and round P to bf16 before PV, and their backward
    # recomputes P. Both are exact attention at bf16 inputs/outputs; they differ
    # only in rounding and summation order, which is the noise any two correct
    # full-precision implementations have between them.
    noise_curve = train(noise_model, steps, sdpa_backend=SDPBackend.MATH)
    verdict = tracking_verdict(sage_curve, sdpa_curve, noise_curve)
    picks = sorted({0, 1, 4, 9, 19, 29, 39, steps - 1} & set(range(steps)))
    return {**verdict,
            "sdpa_twin_kernels": kernels,
            "sage": [round(sage_curve[i], 4) for i in picks],
            "sdpa": [round(sdpa_curve[i], 4) for i in picks],
            "noise_sdpa_math": [round(noise_curve[i], 4) for i in picks],
            "steps_shown": picks,
            "curves": {"sage": sage_curve, "sdpa": sdpa_curve, "noise_sdpa_math": noise_curve}}


def check_generate(kind: str, steps: int) -> dict[str, Any]:
    """Greedy decoding (KV cache: one query, many keys) with the same weights,
    trained first under SDPA on the data pool so that the continuation of a
    training prompt is not a tie; tokens must agree until the first near tie."""
    sage_model, sdpa_model = hf_twins(kind)
    train(sdpa_model, steps)
    sage_model.load_state_dict(sdpa_model.state_dict())
    prompt = batch(0)[:1, :32]
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
    args = parser.parse_args()
    sage_hf.register()
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "opcheck": check_opcheck,
        "explain (function)": check_explain_function,
        "compile (inductor, fullgraph)": lambda: check_compile(None),
        "compile (reduce-overhead)": lambda: check_compile("reduce-overhead"),
        "cuda-graph (manual capture)": check_cuda_graph,
        "explain (tiny Llama)": check_explain_model,
        "train llama (sage vs sdpa, noise floor)": lambda: check_training("llama", args.steps),
        "train qwen3 (sage vs sdpa, noise floor)": lambda: check_training("qwen3", args.steps),
        "generate llama": lambda: check_generate("llama", args.steps),
        "generate qwen3": lambda: check_generate("qwen3", args.steps),
        "memory d=128": lambda: check_memory(128),
        "memory d=64": lambda: check_memory(64),
    }
    only = [s for s in args.only.split(",") if s]
    results: dict[str, Any] = {"environment": environment(), "sage": sage.__version__,
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
