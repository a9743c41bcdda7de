"""The training-parity report: validation-loss curves (PNG) and the markdown tables.

    python3 bench/training/report.py OUT_PREFIX RESULTS.json [RESULTS.json ...]
        [--notes NOTES.md] [--invalid ARM=REASON ...]

merges the ``training.json`` of one or more runs (arms and Table 2 analyses
by name; later files win) and writes ``OUT_PREFIX.md``,
``OUT_PREFIX-curves.png`` and ``OUT_PREFIX.json``. ``run.py`` calls
:func:`write` after every arm. Gaps are relative: ``(sage - sdpa) / sdpa`` of
the final validation loss, sage against the SDPA arm of the same seed,
QK-norm and tokens per step.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import common  # noqa: E402  (bench/common.py)

common.add_python_path()

from training.table2 import LABELS, PAPER_TABLE2, TENSORS, ds_dominates  # noqa: E402

#: The issue's bar: sage within 0.5% of SDPA (QK-norm, smaller tokens per step).
PARITY = 0.005
HEADLINE = (("sage-qknorm-s0", "sdpa-qknorm-s0"), ("sage-qknorm-s1", "sdpa-qknorm-s1"))


def merge(runs: list[dict]) -> dict:
    """One results dict from several runs: arms, Table 2 and skips united; the
    runs' headers kept under ``runs``."""
    merged: dict[str, Any] = {"arms": {}, "table2": {}, "skipped": [], "runs": []}
    for run in runs:
        merged["arms"].update(run.get("arms", {}))
        merged["table2"].update(run.get("table2", {}))
        merged["skipped"] += run.get("skipped", [])
        if run.get("grad_check"):
            merged.setdefault("grad_checks", []).append(
                {"date": (run.get("environment") or {}).get("date_utc"), **run["grad_check"]})
        merged["runs"].append({k: v for k, v in run.items()
                               if k not in ("arms", "table2", "skipped", "runs",
                                            "grad_check")})
        for key in ("data", "model", "tokens", "environment", "command", "suite"):
            merged.setdefault(key, run.get(key))
    done = set(merged["arms"])
    merged["skipped"] = [s for s in merged["skipped"] if s["arm"] not in done]
    return merged


def gap(arms: dict, name: str, reference: str | None) -> float | None:
    """Relative gap of ``name``'s final validation loss to ``reference``'s."""
    if not reference or reference not in arms or name not in arms:
        return None
    a, r = arms[name].get("final_val_loss"), arms[reference].get("final_val_loss")
    if a is None or r is None or not (math.isfinite(a) and math.isfinite(r)):
        return None
    return (a - r) / r


def seed_spread(arms: dict) -> dict[str, float] | None:
    """The SDPA QK-norm arms' final losses over seeds: max - min, relative to the mean."""
    losses = [a["final_val_loss"] for n, a in sorted(arms.items())
              if n.startswith("sdpa-qknorm-s") and a.get("complete")]
    if len(losses) < 2:
        return None
    mean = statistics.fmean(losses)
    return {"n": len(losses), "mean": mean, "range": max(losses) - min(losses),
            "relative": (max(losses) - min(losses)) / mean}


def verdict(arms: dict, invalid: dict | None = None) -> dict[str, Any]:
    """The headline: sage vs SDPA with QK-norm at the smaller tokens per step, per seed
    and averaged, against the 0.5% bar (arms named in ``invalid`` do not count)."""
    invalid = invalid or {}
    gaps = {s: gap(arms, s, r) for s, r in HEADLINE
            if s in arms and r in arms and s not in invalid and r not in invalid}
    gaps = {k: v for k, v in gaps.items() if v is not None}
    mean_gap = statistics.fmean(gaps.values()) if gaps else None
    return {"gaps": gaps, "mean_gap": mean_gap, "spread": seed_spread(arms),
            "met": bool(gaps) and all(abs(g) <= PARITY for g in gaps.values())}


def plot(data: dict, png: Path) -> None:
    """Validation loss vs training tokens: small tokens-per-step arms (full and the
    second half), large tokens-per-step arms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = data["arms"]
    small = {n: a for n, a in arms.items() if "tps64k" not in n}
    large = {n: a for n, a in arms.items() if "tps64k" in n}
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    styles: dict[str, dict] = {}
    palette = plt.get_cmap("tab10")
    for i, name in enumerate(sorted(arms)):
        styles[name] = {"color": palette(i % 10),
                        "linestyle": "--" if name.startswith("sdpa") else "-", "linewidth": 1.6}
    panels = ((axes[0], small, "smaller tokens/step: all", 0.0),
              (axes[1], small, "smaller tokens/step: second half", 0.5),
              (axes[2], large, "8x tokens/step (same token budget)", 0.0))
    for ax, group, title, start in panels:
        lows, highs = [], []
        for name, arm in sorted(group.items()):
            evals = [e for e in arm.get("evals", []) if math.isfinite(e["val_loss"])]
            total = arm["config"]["tokens"]
            pts = [(e["tokens"] / 1e6, e["val_loss"]) for e in evals if e["tokens"] >= start * total]
            if not pts:
                continue
            xs, ys = zip(*pts)
            label = f"{name} ({arm['final_val_loss']:.4f})" if arm.get("complete") else name
            if name in (data.get("invalid") or {}):
                label += " INVALID"
            ax.plot(xs, ys, marker="o", markersize=2.5, label=label, **styles[name])
            lows.append(min(ys))
            highs.append(ys[0] if start == 0 else max(ys))
        ax.set_title(title)
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel("validation loss (nats/token)")
        ax.grid(alpha=0.3)
        if not lows:
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
        if lows:
            lo, hi = min(lows), max(highs) if start else min(max(highs), min(lows) + 3)
            ax.set_ylim(lo - 0.02 * (hi - lo + 1e-3), hi + 0.02 * (hi - lo + 1e-3))
            ax.legend(fontsize=7)
    env = (data.get("environment") or {})
    fig.suptitle(f"SageBwd vs SDPA training parity: {env.get('device', '?')}, "
                 f"{data.get('tokens', 0) / 1e6:.1f}M tokens per arm", fontsize=11)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f}%"


def arms_table(data: dict) -> str:
    """One row per arm: settings, final validation loss, gap to its SDPA reference
    (arms in ``data["invalid"]`` are marked)."""
    rows = []
    invalid = data.get("invalid") or {}
    for name, arm in data["arms"].items():
        cfg, spec = arm["config"], arm["arm"]
        last_qk = (arm.get("evals") or [{}])[-1].get("qk") or []
        sigma = max((max(l["q_std"], l["k_std"]) for l in last_qk), default=None)
        rows.append([name + (" (INVALID, see above)" if name in invalid else ""),
                     f"{cfg['tokens_per_step']:,}", cfg["steps"],
                     f"{arm['final_val_loss']:.4f}" if arm.get("complete") else "(incomplete)",
                     arm.get("final_val_loss_sdpa_eval"),
                     spec.get("reference") or "-",
                     _pct(gap(data["arms"], name, spec.get("reference"))),
                     "yes" if arm.get("diverged") else "no",
                     sigma, f"{arm.get('tokens_per_s', 0):,}", arm.get("seconds")])
    return common.markdown_table(
        ["arm", "tokens/step", "steps", "final val loss", "same weights, SDPA eval",
         "reference", "gap", "diverged",
         "max σ(q,k)", "tokens/s", "s"], rows)


def table2_section(name: str, analysis: dict) -> str:
    """The Table 2 analogue of one checkpoint: the worst layer in full, all layers short."""
    if "error" in analysis:
        return f"### {name}\n\nfailed: {analysis['error']}\n"
    worst_i = analysis["worst_layer"]
    worst = analysis["layers"][worst_i]
    rows = [[LABELS[t], worst[t]["cos"], worst[t]["rel_l2"], PAPER_TABLE2[t][0],
             PAPER_TABLE2[t][1]] for t in TENSORS]
    lines = [f"### {name}: layer {worst_i} (largest dQ+dK error), "
             f"{analysis['batch']} x {analysis['seq_len']} validation tokens",
             "", f"σ_q {worst['sigma_q']:.3g}, σ_k {worst['sigma_k']:.3g}, σ_v "
             f"{worst['sigma_v']:.3g}; RMS dP {worst['rms_dp']:.3g}, RMS dS {worst['rms_ds']:.3g}",
             "", common.markdown_table(["tensor", "cos", "rel-L2", "paper cos", "paper rel-L2"],
                                       rows), ""]
    dominated = ds_dominates(worst)
    lines.append(f"dS dominates (its rel-L2 exceeds δ, P, O and dV, so the error enters at "
                 f"dS and flows to dQ, dK): **{'yes' if dominated else 'no'}**. dS rel-L2 "
                 f"{worst['ds']['rel_l2']:.4f} vs the largest of δ/P/O/dV "
                 f"{max(worst[t]['rel_l2'] for t in ('delta', 'p', 'o', 'dv')):.4f}.")
    short = [[i, l["sigma_q"], l["sigma_k"]] + [l[t]["rel_l2"] for t in
                                                ("delta", "p", "ds", "o", "dq", "dk", "dv")]
             for i, l in enumerate(analysis["layers"])]
    lines += ["", "All layers (rel-L2):", "",
              common.markdown_table(["layer", "σ_q", "σ_k", "δ", "P", "dS", "O", "dQ", "dK",
                                     "dV"], short), ""]
    return "\n".join(lines)


def markdown(data: dict) -> str:
    """The whole report."""
    arms = data["arms"]
    invalid = data.get("invalid") or {}
    v = verdict(arms, invalid)
    env = data.get("environment") or {}
    meta = data.get("data") or {}
    model = data.get("model") or {}
    lines = ["# SageBwd training parity (issue 14)", ""]
    if data.get("notes"):
        lines += [data["notes"].rstrip(), ""]
    for run in data.get("runs") or [data]:
        e = run.get("environment") or {}
        lines.append(f"- Run: {e.get('date_utc')} on {e.get('device', 'CPU')}, torch "
                     f"{e.get('torch')}, commit {e.get('commit')}; command `{run.get('command')}`"
                     f" (suite {run.get('suite')}).")
    if meta:
        lines.append(f"- Data: {meta.get('files')} Python source files of the machine "
                     f"(Python {meta.get('python')}: stdlib + site-packages), split by file: "
                     f"{meta['tokens']['train']:,} train / {meta['tokens']['val']:,} validation "
                     f"tokens; {meta.get('tokenizer')} tokenizer, vocab {meta.get('vocab_size')}; "
                     f"file list sha256 {meta.get('file_list_sha256', '')[:12]}, tokens sha256 "
                     f"{meta.get('token_sha256', {}).get('train', '')[:12]}.")
    if model:
        lines.append(f"- Model: LLaMA-style, dim {model.get('dim')}, {model.get('n_layers')} "
                     f"layers, {model.get('n_heads')} heads of {model.get('dim', 0) // max(1, model.get('n_heads', 1))}, "
                     f"context {model.get('max_seq_len')}, SwiGLU, RoPE; bf16 autocast, AdamW "
                     f"(lr 1e-3, betas 0.9/0.95, wd 0.1, clip 1.0), 5% warm-up + cosine to 10%.")
    lines.append(f"- Token budget per arm: {data.get('tokens', 0):,}; final validation loss over "
                 f"the first {next(iter(arms.values()), {}).get('final_eval_tokens', 0):,} "
                 f"validation tokens, evaluated with each arm's own attention.")
    lines += ["", "## Headline: sage vs SDPA, QK-norm, smaller tokens per step", ""]
    spread = v["spread"]
    if v["gaps"]:
        for s, g in v["gaps"].items():
            lines.append(f"- {s}: gap {_pct(g)} to its SDPA twin.")
        lines.append(f"- mean gap over seeds: {_pct(v['mean_gap'])}.")
    if spread:
        lines.append(f"- noise floor: SDPA over {spread['n']} seeds spans "
                     f"{spread['range']:.4f} ({100 * spread['relative']:.2f}% of the mean "
                     f"{spread['mean']:.4f}).")
    state = "met" if v["met"] else ("not met" if v["gaps"] else "not measured (no valid sage arm)")
    lines.append(f"- bar (|gap| <= {100 * PARITY:.1f}% at every seed): **{state}**.")
    for name, reason in invalid.items():
        lines.append(f"- {name} is invalid: {reason}")
    lines += ["", "## All arms", "", arms_table(data), ""]
    if data.get("skipped"):
        lines.append("Skipped for time: " + ", ".join(s["arm"] for s in data["skipped"]) + ".")
        lines.append("")
    for check in data.get("grad_checks") or []:
        lines += [f"## Pre-flight gradient check ({check.get('date')})", "",
                  f"sage.attention at the model's attention shape {check['shape']} (causal, bf16, "
                  f"unit-Gaussian inputs) vs float64; limit {check['limit']} rel-L2.", ""]
        rows = [[r["variant"]] + ([r.get(k) for k in ("o", "dq", "dk", "dv")] if "error" not in r
                                  else [r["error"], "-", "-", "-"]) + ["ok" if r["ok"] else "FAIL"]
                for r in check["rows"]]
        lines += [common.markdown_table(["inputs", "O", "dQ", "dK", "dV", ""], rows), ""]
    if data.get("table2"):
        lines += ["## Table 2 analogue (per-tensor error of SageBwd vs full precision)", "",
                  "q, k, v and dO from a full-precision (SDPA) forward and backward of the "
                  "trained checkpoint on validation sequences; SageBwd = the float64 emulation "
                  "of the kernels' quantization (sage.reference.sagebwd), reference = exact "
                  "float64 attention. dP is exact by construction (16-bit in SageBwd, dO "
                  "taken as exact), as in the paper. Paper: [SBWD] Table 2, layer 11 of the "
                  "QK-normed 2.1M tokens/step 325M run.", ""]
        for name, analysis in data["table2"].items():
            lines.append(table2_section(name, analysis))
    return "\n".join(lines).rstrip() + "\n"


def write(data: dict, md: Path, png: Path | None) -> None:
    """Writes the markdown report and (when ``png``) the curves."""
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(markdown(data))
    if png is not None and data["arms"]:
        plot(data, png)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefix", type=Path)
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--notes", type=Path, default=None,
                        help="a markdown file put under the title")
    parser.add_argument("--invalid", action="append", default=[], metavar="ARM=REASON",
                        help="an arm whose result must not count (e.g. a known kernel bug)")
    args = parser.parse_args(argv)
    prefix = args.prefix
    data = merge([json.loads(p.read_text()) for p in args.results])
    if args.notes:
        data["notes"] = args.notes.read_text()
    data["invalid"] = dict(item.split("=", 1) for item in args.invalid)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    write(data, Path(f"{prefix}.md"), Path(f"{prefix}-curves.png"))
    print(Path(f"{prefix}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
