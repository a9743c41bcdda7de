"""A few training steps of sage.nn's model with SageBwd on the GPU (issue 14).

The same tiny model, seed and batches trained with ``sage.attention`` and with
SDPA: every step's loss within 1% (SageBwd's INT8 error is ~1.5% relative L2 on
the attention output, much less on the loss), no non-finite value, and the
parameters still close after the steps. Skipped without a GPU (conftest.py) or
torch. The full comparison is ``bash scripts/gpu/run.sh training``.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
from repo_files import ROOT

torch = pytest.importorskip("torch")

sys.path.insert(0, str(ROOT / "bench"))
from training.train import TrainConfig, train  # noqa: E402

from sage.nn import AttentionOptions, LlamaConfig  # noqa: E402


def _stream(n: int = 200_000, vocab: int = 512) -> np.ndarray:
    """A learnable token stream: a noisy repeating pattern."""
    rng = np.random.default_rng(0)
    base = np.tile(rng.integers(0, vocab, 997), n // 997 + 1)[:n]
    noise = rng.random(n) < 0.1
    return np.where(noise, rng.integers(0, vocab, n), base).astype(np.uint16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("qk_norm", [True, False])
def test_sage_training_steps_track_sdpa(qk_norm):
    stream = _stream()
    model = LlamaConfig(vocab_size=512, dim=128, n_layers=2, n_heads=2, max_seq_len=256,
                        qk_norm=qk_norm)
    results = {}
    for backend in ("sdpa", "sage"):
        cfg = TrainConfig(backend, replace(model, attention=AttentionOptions(backend)),
                          batch_size=8, tokens=30 * 8 * 256, evals=1, eval_tokens=4 * 256,
                          final_eval_tokens=8 * 256, eval_batch=4, log_every=1, lr=3e-3)
        results[backend], _ = train(cfg, stream[:150_000], stream[150_000:],
                                    torch.device("cuda"), log=lambda _: None)
    sdpa = np.array([t["loss"] for t in results["sdpa"]["train"]])
    sage = np.array([t["loss"] for t in results["sage"]["train"]])
    assert sage.shape == (30,) and np.isfinite(sage).all()
    assert sdpa[-1] < 0.8 * sdpa[0]  # it learns
    np.testing.assert_allclose(sage, sdpa, rtol=1e-2)
    assert results["sage"]["final_val_loss"] == pytest.approx(
        results["sdpa"]["final_val_loss"], rel=1e-2)
