"""The arms of the training-parity comparison and the suites that group them.

Every arm trains the same model shape on the same data with the same token
budget; arms differ only in the attention backend, QK-norm, SageBwd's
smoothing switches, tokens per step and seed. Each SageBwd arm names the SDPA
arm it is compared with (same seed, QK-norm and tokens per step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sage.nn import AttentionOptions, LlamaConfig

#: ~17M parameters (10.6M without embeddings), head_dim 64, 512-token context.
MODEL = LlamaConfig(vocab_size=8192, dim=384, n_layers=6, n_heads=6, max_seq_len=512)
SMALL_BATCH = 16    # 8,192 tokens per step
LARGE_BATCH = 128   # 65,536 tokens per step (8x)


@dataclass(frozen=True)
class Arm:
    """One training run's switches."""

    name: str
    backend: str = "sdpa"
    qk_norm: bool = True
    smooth_k: bool = True
    smooth_q: bool = False
    batch_size: int = SMALL_BATCH
    seed: int = 0
    reference: str | None = None

    def model(self, base: LlamaConfig) -> LlamaConfig:
        """``base`` with this arm's QK-norm and attention options."""
        return replace(base, qk_norm=self.qk_norm,
                       attention=AttentionOptions(self.backend, self.smooth_k, self.smooth_q))

    def describe(self) -> str:
        """A short human label."""
        parts = [self.backend, "QK-norm" if self.qk_norm else "no QK-norm"]
        if self.backend.startswith("sage"):
            if not self.smooth_k:
                parts.append("K-smoothing off")
            if self.smooth_q:
                parts.append("Q-smoothing on")
        parts.append(f"batch {self.batch_size}")
        parts.append(f"seed {self.seed}")
        return ", ".join(parts)


def _arms() -> dict[str, Arm]:
    arms = [
        Arm("sdpa-qknorm-s0"),
        Arm("sage-qknorm-s0", "sage", reference="sdpa-qknorm-s0"),
        Arm("sdpa-qknorm-s1", seed=1),
        Arm("sage-qknorm-s1", "sage", seed=1, reference="sdpa-qknorm-s1"),
        Arm("sage-qknorm-nosmoothk-s0", "sage", smooth_k=False, reference="sdpa-qknorm-s0"),
        Arm("sdpa-noqknorm-s0", qk_norm=False),
        Arm("sage-noqknorm-s0", "sage", qk_norm=False, reference="sdpa-noqknorm-s0"),
        Arm("sdpa-qknorm-tps64k-s0", batch_size=LARGE_BATCH),
        Arm("sage-qknorm-tps64k-s0", "sage", batch_size=LARGE_BATCH,
            reference="sdpa-qknorm-tps64k-s0"),
        Arm("sage-qknorm-smoothq-s0", "sage", smooth_q=True, reference="sdpa-qknorm-s0"),
    ]
    return {a.name: a for a in arms}


ARMS = _arms()

#: The headline pair's names for any seed, and the noise twin's: SDPA pinned to the
#: math backend (float32 attention), same seed, data and init as ``sdpa-qknorm-s<seed>``.
#: Its gap to that arm is what rounding alone does to a run, the null for sage's gap.
_SEEDED = re.compile(r"(sdpa|sage|sdpamath)-qknorm-s(\d+)")


def arm(name: str) -> Arm:
    """The arm called ``name``: one of :data:`ARMS`, or a headline-pair or twin arm
    (``sdpa-qknorm-s<N>``, ``sage-qknorm-s<N>``, ``sdpamath-qknorm-s<N>``) for any seed.

    Raises ``KeyError`` for an unknown name.
    """
    if name in ARMS:
        return ARMS[name]
    match = _SEEDED.fullmatch(name)
    if not match:
        raise KeyError(name)
    kind, seed = match.group(1), int(match.group(2))
    if kind == "sdpa":
        return Arm(name, seed=seed)
    backend = "sage" if kind == "sage" else "sdpa-math"
    return Arm(name, backend, seed=seed, reference=f"sdpa-qknorm-s{seed}")


def seeds_suite(seeds: int, twins: bool = False) -> dict:
    """The headline comparison over seeds ``0 .. seeds-1``: per seed the SDPA arm, the
    sage arm and (``twins``) the SDPA math-backend twin, in that order, so that a run
    cut short by its budget keeps whole pairs of the first seeds. No Table 2."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    kinds = ("sdpa", "sage", "sdpamath") if twins else ("sdpa", "sage")
    return {"arms": [f"{k}-qknorm-s{s}" for s in range(seeds) for k in kinds], "table2": []}

#: Suites in run order; ``table2`` names the arms whose final checkpoint gets
#: the Table 2 analysis right after training.
SUITES: dict[str, dict] = {
    "main": {"arms": ["sdpa-qknorm-s0", "sage-qknorm-s0", "sdpa-qknorm-s1", "sage-qknorm-s1",
                      "sage-qknorm-nosmoothk-s0"],
             "table2": ["sage-qknorm-s0"]},
    "ablations": {"arms": ["sdpa-noqknorm-s0", "sage-noqknorm-s0", "sdpa-qknorm-tps64k-s0",
                           "sage-qknorm-tps64k-s0", "sage-qknorm-smoothq-s0"],
                  "table2": ["sage-qknorm-tps64k-s0", "sage-noqknorm-s0"]},
}
#: A two-arm smoke run (the CI test and ``run.py --suite tiny``).
SUITES["tiny"] = {"arms": ["sdpa-qknorm-s0", "sage-qknorm-s0"], "table2": ["sage-qknorm-s0"]}
SUITES["all"] = {"arms": SUITES["main"]["arms"] + SUITES["ablations"]["arms"],
                 "table2": SUITES["main"]["table2"] + SUITES["ablations"]["table2"]}
#: The headline over seeds (``run.py --suite seeds --seeds N [--twins]``); the
#: default here is three seeds without twins.
SUITES["seeds"] = seeds_suite(3)


__all__ = ["ARMS", "Arm", "LARGE_BATCH", "MODEL", "SMALL_BATCH", "SUITES", "arm",
           "seeds_suite"]
