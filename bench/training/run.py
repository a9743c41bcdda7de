"""Training parity of SageBwd vs full-precision attention: the one command.

    python3 bench/training/run.py OUT_DIR [--suite main|ablations|all|seeds]
        [--tokens auto|N] [--budget-s 540] [--data-dir DIR] [--tokenizer-json PATH]
        [--seeds N] [--twins] [--workers K]

On the GPU machine it is ``bash scripts/gpu/run.sh training`` (suite
``main``) and ``bash scripts/gpu/run.sh training-ablations``, each a single
device call of under 10 minutes. Steps:

0. on a GPU, check sage.attention's gradients at the model's attention shape
   against float64 (``grad_check.py``); stop if the harness's inputs fail;
1. build the dataset (``data.py``: this machine's Python sources, BPE) unless
   ``--data-dir`` already holds one;
2. with ``--tokens auto``, time a few steps of SDPA and SageBwd at both
   tokens-per-step settings and choose the largest token budget (a multiple
   of the large setting's tokens per step) with which the longer of the
   ``main`` and ``ablations`` suites trains in ``--training-budget-s``; the
   budget is recorded so the other suite can be run with the same
   ``--tokens``;
3. train the suite's arms (``arms.py``) in order, skipping an arm whose
   projected time no longer fits ``--budget-s``, and run the Table 2 analysis
   (``table2.py``) on the checkpoints the suite names;
4. after every evaluation and arm, rewrite ``OUT_DIR/training.json`` and, after
   every arm, ``training.md`` and ``training-curves.png`` (``report.py``), so
   a run cut short keeps what it measured.

``--suite seeds --seeds N`` is the headline comparison alone (SDPA and sage,
QK-norm, 8,192 tokens per step) over seeds 0..N-1, with ``--twins`` also the
SDPA math-backend twin of every seed (``arms.seeds_suite``): the gap of the
twin to its SDPA arm is what rounding alone does to a run, the null against
which sage's per-seed gaps are read.

``--workers K`` trains up to K arms at once, each in its own process
(``run.py --arms NAME`` on the data already built): at this model size a step
is bound by the CPU's kernel launches, not by the GPU, so concurrent arms
share the GPU at little cost each. An arm's numerics do not depend on K; its
tokens/s does (it is then not the serial throughput). An arm is started only
if its projected time fits the budget (the longest wall time of a finished arm
of the same backend and batch; else a finished arm's wall time scaled by the
serial probe rates ``--rates``; before any finished, the serial rate times K),
an SDPA arm only if the arms compared with it fit too, and no arm whose SDPA
reference was skipped.

``--suite tiny`` (or ``--tiny`` with another suite) runs a two-layer model
for a few steps on any machine (CPU included: the SageBwd arms then use the
interpreter and the float64 emulation); the CI test calls the same functions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

BENCH = Path(__file__).resolve().parents[1]
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import common  # noqa: E402  (bench/common.py)

common.add_python_path()

from training import arms as arms_mod  # noqa: E402
from training import data as data_mod  # noqa: E402
from training import grad_check as grad_check_mod  # noqa: E402
from training import report  # noqa: E402
from training import table2 as table2_mod  # noqa: E402
from training.train import Batches, TrainConfig, train, val_windows  # noqa: E402

from sage.nn import Llama  # noqa: E402

#: Per-arm time beyond the probed training steps (evaluations, plots), as a factor
#: (measured on the H100: 1.28-1.34).
OVERHEAD = 1.35


def train_config(arm: arms_mod.Arm, model: Any, tokens: int, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of ``arm`` for a ``model`` shape and a token budget."""
    settings: dict[str, Any] = dict(batch_size=arm.batch_size, seed=arm.seed)
    settings.update(overrides)
    return TrainConfig(name=arm.name, model=arm.model(model), tokens=tokens, **settings)


def time_steps(cfg: TrainConfig, stream: np.ndarray, device: torch.device, steps: int,
               warmup: int) -> float:
    """Seconds per training token of ``cfg`` (a throwaway model; ``warmup`` steps
    untimed, which also compiles the kernels)."""
    torch.manual_seed(0)
    model = Llama(cfg.model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    batches = Batches(stream, cfg.seq_len, cfg.batch_size, 0, device)
    start = 0.0
    for step in range(warmup + steps):
        if step == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.monotonic()
        x, y = batches.get(step)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = model.loss(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.monotonic() - start) / (steps * cfg.tokens_per_step)


def on_device(arm: arms_mod.Arm, device: torch.device) -> arms_mod.Arm:
    """``arm`` with the GPU SageBwd backend replaced by the interpreter on a CPU."""
    return replace(arm, backend="sage-interpret") if (
        device.type == "cpu" and arm.backend == "sage") else arm


def rate_key(arm: arms_mod.Arm) -> str:
    """The probe timing that stands for ``arm``: backend family (the SDPA backends
    together, the SageBwd ones together) and batch size."""
    return f"{'sdpa' if arm.backend.startswith('sdpa') else 'sage'}-b{arm.batch_size}"


def choose_tokens(model: Any, stream: np.ndarray, device: torch.device, budget_s: float,
                  suites: list[list[str]], log: Any = print) -> tuple[int, dict]:
    """The token budget with which each of ``suites`` (lists of arm names) fits
    ``budget_s`` of training (probe timings)."""
    probe: dict[str, float] = {}
    for backend in ("sdpa", "sage"):
        for batch, steps, warmup in ((arms_mod.SMALL_BATCH, 24, 6), (arms_mod.LARGE_BATCH, 4, 2)):
            arm = on_device(arms_mod.Arm(f"probe-{backend}-{batch}", backend, batch_size=batch),
                            device)
            cfg = train_config(arm, model, batch * model.max_seq_len)
            key = f"{backend}-b{batch}"
            probe[key] = time_steps(cfg, stream, device, steps, warmup)
            log(f"probe {key}: {1e3 * probe[key] * cfg.tokens_per_step:.1f} ms/step, "
                f"{1 / probe[key]:.0f} tokens/s")
    per_token = max(sum(probe[rate_key(arms_mod.ARMS[n])] for n in names)
                    for names in suites) * OVERHEAD
    unit = arms_mod.LARGE_BATCH * model.max_seq_len
    tokens = max(unit, int(budget_s / per_token) // unit * unit)
    return tokens, {"seconds_per_token": probe, "budget_s": budget_s, "suites": suites,
                    "projected_s": tokens * per_token}


def build_data(args: argparse.Namespace, log: Any = print) -> tuple[np.ndarray, np.ndarray, dict]:
    """The dataset: ``--data-dir`` if it holds one, else built there."""
    data_dir = args.data_dir
    if not (data_dir / "meta.json").exists():
        data_mod.build(data_dir, max_mb=args.max_mb, tokenizer=args.tokenizer,
                       tokenizer_json=args.tokenizer_json, vocab=args.vocab)
    train_stream, val_stream, meta = data_mod.load(data_dir)
    log(f"data: {meta['tokens']} tokens, vocab {meta['vocab_size']}, "
        f"file list {meta['file_list_sha256'][:12]}, tokenizer "
        f"{(meta.get('tokenizer_sha256') or 'byte')[:12]}")
    return train_stream, val_stream, meta


class Results:
    """The run's JSON (``training.json``) and report files in ``out_dir``."""

    def __init__(self, out_dir: Path, header: dict) -> None:
        self.out_dir = out_dir
        self.data: dict[str, Any] = dict(header, arms={}, table2={}, skipped=[])

    def save(self) -> None:
        """Writes ``training.json``."""
        path = self.out_dir / "training.json"
        path.write_text(json.dumps(self.data, indent=1, default=str) + "\n")

    def report(self) -> None:
        """Writes ``training.md`` and ``training-curves.png`` (never fails the run)."""
        try:
            report.write(self.data, self.out_dir / "training.md",
                         self.out_dir / "training-curves.png")
        except Exception as exc:  # noqa: BLE001 - the run must go on
            print(f"report failed: {common.error_text(exc)}", flush=True)


def suite_of(args: argparse.Namespace) -> dict:
    """The suite the command line asks for: ``--suite`` (``seeds`` sized by
    ``--seeds`` and ``--twins``), or the arms of ``--arms``."""
    suite = dict(arms_mod.seeds_suite(args.seeds, args.twins) if args.suite == "seeds"
                 else arms_mod.SUITES[args.suite])
    if args.arms:
        suite["arms"] = [a.strip() for a in args.arms.split(",") if a.strip()]
        unknown = []
        for name in suite["arms"]:
            try:
                arms_mod.arm(name)
            except KeyError:
                unknown.append(name)
        if unknown:
            raise SystemExit(f"unknown arms {unknown}; known: {sorted(arms_mod.ARMS)} and "
                             f"sdpa-/sage-/sdpamath-qknorm-s<N>")
    return suite


def _backend_key(arm: arms_mod.Arm) -> str:
    """What a concurrent arm's measured wall time stands for: its exact backend (the
    SDPA math twin is slower than SDPA) and batch size."""
    return f"{arm.backend}-b{arm.batch_size}"


def run_workers(args: argparse.Namespace, names: list[str], tokens: int, results: Results,
                budget: common.Budget, device: torch.device) -> None:
    """Trains ``names`` in up to ``args.workers`` concurrent ``run.py --arms NAME``
    processes (in order: an arm starts when a worker is free and its projected
    time fits ``budget``) and merges each arm's result into ``results`` as it ends."""
    work = Path(tempfile.mkdtemp(prefix="sage-training-workers-"))
    env = dict(os.environ)
    # Each worker mostly launches kernels from one thread; more intra-op threads
    # per process would only oversubscribe the CPU that the workers share.
    env.setdefault("OMP_NUM_THREADS", "2")
    queue = list(names)
    running: dict[str, tuple[subprocess.Popen, float, Path]] = {}
    measured: dict[str, tuple[float, float | None]] = {}  # key -> (wall s, serial rate)

    def project(arm: arms_mod.Arm) -> float:
        """Seconds ``arm`` is expected to take among the concurrent arms (0: unknown)."""
        rate = (args.rates or {}).get(rate_key(arm))
        if _backend_key(arm) in measured:
            return measured[_backend_key(arm)][0]
        # Another backend's wall time scaled by the serial rates carries the
        # slowdown of sharing the GPU; the serial rate times K is the bound
        # used before any arm has finished.
        scaled = [wall * rate / other for wall, other in measured.values() if rate and other]
        if scaled:
            return max(scaled)
        return tokens * rate * OVERHEAD * args.workers if rate else 0.0

    while queue or running:
        while queue and len(running) < args.workers:
            name = queue.pop(0)
            arm = on_device(arms_mod.arm(name), device)
            # An SDPA arm is only worth training if the arms compared with it fit too.
            projected = max([project(arm)] + [
                project(on_device(arms_mod.arm(q), device)) for q in queue
                if arms_mod.arm(q).reference == name])
            skipped = {s["arm"] for s in results.data["skipped"]}
            if arm.reference in skipped or (projected and not budget.fits(projected)):
                # An arm whose reference was skipped could not be compared with anything.
                why = (f"its reference {arm.reference} was skipped" if arm.reference in skipped
                       else f"{projected:.0f} s projected, {budget.left():.0f} s left")
                print(f"[{name}] skipped: {why}", flush=True)
                results.data["skipped"].append({"arm": name, "projected_s": projected,
                                                "left_s": budget.left()})
                results.save()
                continue
            out = work / name
            cmd = [sys.executable, str(Path(__file__).resolve()), str(out), "--suite",
                   args.suite, "--arms", name, "--tokens", str(tokens), "--data-dir",
                   str(args.data_dir), "--no-grad-check", "--no-report", "--device",
                   device.type, "--table2-batch", str(args.table2_batch)]
            if args.tiny:
                cmd.append("--tiny")
            log = (work / f"{name}.log").open("w")
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
            running[name] = (proc, time.monotonic(), out)
            print(f"[{name}] started (worker pid {proc.pid}; {len(running)} running)",
                  flush=True)
        time.sleep(0.5)
        for name, (proc, started, out) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[name]
            wall = time.monotonic() - started
            print((work / f"{name}.log").read_text().rstrip(), flush=True)
            try:
                child = json.loads((out / "training.json").read_text())
                entry = child["arms"][name]
            except (OSError, KeyError, ValueError) as exc:
                print(f"[{name}] worker failed (exit {proc.returncode}): "
                      f"{common.error_text(exc)}", flush=True)
                results.data.setdefault("failed", []).append(
                    {"arm": name, "returncode": proc.returncode})
                results.save()
                continue
            entry["wall_s"] = round(wall, 1)
            results.data["arms"][name] = entry
            results.data["table2"].update(child.get("table2", {}))
            done = on_device(arms_mod.arm(name), device)
            key = _backend_key(done)
            measured[key] = (max(measured.get(key, (0.0, None))[0], wall),
                             (args.rates or {}).get(rate_key(done)))
            print(f"[{name}] finished in {wall:.0f} s wall ({len(running)} running, "
                  f"{budget.left():.0f} s left)", flush=True)
            results.save()
            results.report()
    shutil.rmtree(work, ignore_errors=True)


def run_suite(args: argparse.Namespace) -> dict:
    """Runs everything the command line asks for; returns the results dict."""
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    budget = common.Budget(args.budget_s)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    args.tiny = args.tiny or args.suite == "tiny"
    suite = suite_of(args)
    check = None
    if device.type == "cuda" and args.grad_check:
        check = grad_check_mod.grad_check()
        print(grad_check_mod.table(check), flush=True)
        header = {"suite": args.suite, "command": " ".join(sys.argv),
                  "environment": common.environment(), "grad_check": check}
        (out_dir / "training.json").write_text(json.dumps(header, indent=1) + "\n")
        if not grad_check_mod.harness_ok(check):
            print("grad check failed for the inputs the harness passes: no training", flush=True)
            return dict(header, arms={}, skipped=[], seconds=0.0, aborted="grad check")
    train_stream, val_stream, meta = build_data(args)
    if (args.data_dir / "tokenizer.json").exists():
        shutil.copy(args.data_dir / "tokenizer.json", out_dir / "tokenizer.json")
    model = replace(arms_mod.MODEL, vocab_size=meta["vocab_size"])
    overrides: dict[str, Any] = {}
    if args.tiny:
        model = replace(model, dim=128, n_layers=2, n_heads=2, max_seq_len=64)
        overrides = dict(batch_size=4, evals=2, eval_tokens=64 * 4, final_eval_tokens=64 * 4,
                         eval_batch=4, log_every=1)
        if args.tokens == "auto":
            args.tokens = str(4 * 4 * 64)
    if args.tokens == "auto":
        tokens, choice = choose_tokens(model, train_stream, device, args.training_budget_s,
                                       [arms_mod.SUITES[s]["arms"] for s in ("main", "ablations")])
        print(f"token budget: {tokens} ({choice['projected_s']:.0f} s projected for the "
              f"longer suite)", flush=True)
        args.rates = choice["seconds_per_token"]
    else:
        tokens, choice = int(args.tokens), None
    results = Results(out_dir, {
        "suite": args.suite, "command": " ".join(sys.argv), "environment": common.environment(),
        "data": meta, "model": model.to_dict(), "tokens": tokens, "token_choice": choice,
        "seconds_per_token": args.rates, "grad_check": check,
        "workers": args.workers,
    })
    results.save()
    if args.workers > 1:
        run_workers(args, suite["arms"], tokens, results, budget, device)
        suite = dict(suite, arms=[])
    for name in suite["arms"]:
        arm = on_device(arms_mod.arm(name), device)
        cfg = train_config(arm, model, tokens, **overrides)
        rate = (args.rates or {}).get(rate_key(arm))
        projected = tokens * rate * OVERHEAD if rate else 0.0
        if projected and not budget.fits(projected):
            print(f"[{name}] skipped: {projected:.0f} s projected, {budget.left():.0f} s left",
                  flush=True)
            results.data["skipped"].append({"arm": name, "projected_s": projected,
                                            "left_s": budget.left()})
            results.save()
            continue
        entry = {"arm": vars(arm), "label": arm.describe()}

        def on_eval(partial: dict, entry: dict = entry, name: str = name) -> None:
            results.data["arms"][name] = dict(entry, **partial, complete=False)
            results.save()

        result, trained = train(cfg, train_stream, val_stream, device, on_eval=on_eval)
        results.data["arms"][name] = dict(entry, **result, complete=True)
        results.save()
        if name in suite["table2"]:
            start = time.monotonic()
            windows = val_windows(val_stream, cfg.seq_len, args.table2_batch * cfg.seq_len,
                                  device)
            try:
                analysis = table2_mod.table2(trained, windows[:, :-1], windows[:, 1:],
                                             arms_mod.arm(name).model(model).attention)
                analysis["seconds"] = round(time.monotonic() - start, 1)
                results.data["table2"][name] = analysis
                worst = analysis["layers"][analysis["worst_layer"]]
                print(f"[{name}] table 2: worst layer {analysis['worst_layer']}: " + ", ".join(
                    f"{k} {worst[k]['cos']:.4f}/{worst[k]['rel_l2']:.4f}"
                    for k in table2_mod.TENSORS) + f" ({analysis['seconds']} s)", flush=True)
            except Exception as exc:  # noqa: BLE001 - keep the training results
                results.data["table2"][name] = {"error": common.error_text(exc)}
                print(f"[{name}] table 2 failed: {common.error_text(exc)}", flush=True)
            results.save()
        del trained
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if args.report:
            results.report()
    results.data["seconds"] = round(budget.elapsed(), 1)
    results.save()
    if args.report:
        results.report()
    return results.data


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--suite", choices=sorted(arms_mod.SUITES), default="main")
    parser.add_argument("--arms", default=None,
                        help="comma-separated arm names to run instead of the suite's")
    parser.add_argument("--seeds", type=int, default=3,
                        help="with --suite seeds: the headline pair for seeds 0..N-1")
    parser.add_argument("--twins", action="store_true",
                        help="with --suite seeds: also each seed's SDPA math-backend twin")
    parser.add_argument("--workers", type=int, default=1,
                        help="arms trained at once, each in its own process")
    parser.add_argument("--tiny", action="store_true",
                        help="the tiny model and schedule of --suite tiny, with any suite")
    parser.add_argument("--tokens", default="auto",
                        help="token budget per arm, or 'auto' (probe and fit the ablations)")
    parser.add_argument("--budget-s", type=float, default=540,
                        help="wall-clock budget of this run; arms that would not fit are skipped")
    parser.add_argument("--training-budget-s", type=float, default=400,
                        help="with --tokens auto: the training time the longer of the main and "
                             "ablations suites may take")
    parser.add_argument("--rates", type=json.loads, default=None,
                        help="JSON of probe seconds per token (from an earlier run's "
                             "token_choice) for skipping arms that would not fit")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/sage-training-data"))
    parser.add_argument("--tokenizer", choices=("bpe", "byte"), default="bpe")
    parser.add_argument("--tokenizer-json", type=Path, default=None)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--max-mb", type=float, default=100)
    parser.add_argument("--table2-batch", type=int, default=2)
    parser.add_argument("--device", default=None)
    parser.add_argument("--no-grad-check", dest="grad_check", action="store_false",
                        help="skip the pre-flight gradient check (grad_check.py) on a GPU")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="write training.json only (the workers of --workers)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = run_suite(args)
    if data.get("aborted"):
        print(f"aborted: {data['aborted']}", flush=True)
        return 3
    bad = [n for n, a in data["arms"].items() if not math.isfinite(a.get("final_val_loss", 0))]
    print(f"done in {data['seconds']} s; arms: {len(data['arms'])}, skipped: "
          f"{len(data['skipped'])}, non-finite: {bad}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
