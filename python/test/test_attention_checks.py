"""The torch-free argument checks of sage.attention (sage.attention_checks):
every rejected case names its argument; accepted calls give the right problem.
The GPU test (gpu/test_attention_gpu.py) checks the same messages through
sage.attention with real tensors."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from sage.attention_checks import (AttentionArgumentError, TensorInfo, check_attention_args,
                                   resolve_sm_scale)
from sage.kernels.sagebwd.launch import Shape

ROOT = Path(__file__).resolve().parents[2]


def _t(shape, dtype="float16", device="cuda:0") -> TensorInfo:
    return TensorInfo(tuple(shape), dtype, device)


def _check(q=(2, 4, 100, 64), k=(2, 2, 120, 64), v=None, *, dtype="float16",
           device="cuda:0", causal=False, sm_scale=None, smooth_k=True, smooth_q=False,
           layout="bhsd", scales="fine"):
    """Checks q, k, v given as shapes (of ``dtype`` on ``device``) or TensorInfos;
    v defaults to k's shape."""
    def info(x):
        return x if isinstance(x, TensorInfo) else _t(x, dtype, device)
    v = (2, 2, 120, 64) if v is None and isinstance(k, TensorInfo) else v
    return check_attention_args(info(q), info(k), info(k if v is None else v), causal=causal,
                                sm_scale=sm_scale, smooth_k=smooth_k, smooth_q=smooth_q,
                                layout=layout, scales=scales)


def test_accepts_gqa_tails_and_resolves_the_scale():
    problem = _check()
    assert problem.shape == Shape(2, 4, 2, 100, 120, 64)
    assert problem.sm_scale == pytest.approx(1 / 8) and problem.dtype == "float16"


def test_bshd_layout_reads_seq_and_heads_swapped():
    problem = _check(q=(2, 100, 4, 128), k=(2, 120, 1, 128), layout="bshd", dtype="bfloat16",
                     sm_scale=0.3)
    assert problem.shape == Shape(2, 4, 1, 100, 120, 128)
    assert problem.sm_scale == 0.3 and problem.layout == "bshd"


def test_causal_needs_no_more_queries_than_keys():
    assert _check(k=(2, 2, 100, 64), causal=True).causal
    assert _check(causal=True).causal  # 100 queries, 120 keys: aligned bottom-right
    with pytest.raises(AttentionArgumentError,
                       match=r"argument causal: causal attention needs seq <= seq_kv "
                             r"\(it is aligned bottom-right.*seq 120 and k/v seq 100"):
        _check(q=(2, 4, 120, 64), k=(2, 2, 100, 64), causal=True)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(dtype="float32"), r"argument q: has dtype float32; .*float16 or bfloat16"),
    (dict(device="cpu"), r"argument q: is on cpu; .*CUDA"),
    (dict(q=(4, 100, 64)), r"argument q: must be 4-D .* got 3-D shape \(4, 100, 64\)"),
    (dict(k=(2, 2, 120, 64, 1)), r"argument k: must be 4-D"),
    (dict(q=(2, 4, 100, 96), k=(2, 2, 120, 96)), r"argument q: head_dim .* \(64, 128\), got 96"),
    (dict(k=(2, 3, 120, 64)), r"argument k: kv_heads 3 must divide q's heads 4"),
    (dict(layout="bsdh"), r"argument layout: must be one of \['bhsd', 'bshd'\]"),
    (dict(layout=None), r"argument layout"),
    (dict(sm_scale=0.0), r"argument sm_scale: must be finite and > 0, got 0.0"),
    (dict(sm_scale=-1.0), r"argument sm_scale: must be finite and > 0"),
    (dict(sm_scale=math.nan), r"argument sm_scale: must be finite and > 0, got nan"),
    (dict(sm_scale=math.inf), r"argument sm_scale: must be finite"),
    (dict(sm_scale="0.1"), r"argument sm_scale: must be a positive float or None, got str"),
    (dict(sm_scale=True), r"argument sm_scale"),
    (dict(causal=1), r"argument causal: must be a bool, got int"),
    (dict(smooth_k=None), r"argument smooth_k: must be a bool"),
    (dict(smooth_q="yes"), r"argument smooth_q: must be a bool"),
    (dict(scales="per_thread"), r"argument scales: must be one of \['fine', 'block'\]"),
    (dict(scales=None), r"argument scales: must be one of"),
    (dict(v=(2, 2, 121, 64)), r"argument v: must have k's shape \(2, 2, 120, 64\)"),
    (dict(k=(3, 2, 120, 64), v=(3, 2, 120, 64)), r"argument k: batch 3 differs from q's 2"),
    (dict(k=(2, 2, 120, 128), v=(2, 2, 120, 128)), r"argument k: head_dim 128 differs"),
    (dict(q=(2, 4, 0, 64)), r"argument q: is empty"),
    (dict(k=(2, 2, 0, 64)), r"argument k: is empty"),
    (dict(k=_t((2, 2, 120, 64), "bfloat16")), r"argument k: has dtype bfloat16, q float16"),
    (dict(v=_t((2, 2, 120, 64), device="cuda:1")), r"argument v: is on cuda:1, q on cuda:0"),
    (dict(v=_t((2, 2, 120, 64), "int8")), r"argument v: has dtype int8"),
    (dict(k=_t((2, 2, 120, 64), device="cpu")), r"argument k: is on cpu"),
])
def test_rejections_name_the_argument(kwargs, pattern):
    with pytest.raises(AttentionArgumentError, match=pattern):
        _check(**kwargs)


def test_the_error_is_a_value_error_and_a_type_error():
    for kind in (ValueError, TypeError):
        with pytest.raises(kind):
            _check(dtype="float32")


def test_no_cuda_is_said_when_torch_has_none():
    with pytest.raises(AttentionArgumentError, match="no CUDA device is available"):
        check_attention_args(_t((1, 1, 8, 64), device="cpu"), _t((1, 1, 8, 64)),
                             _t((1, 1, 8, 64)), causal=False, sm_scale=None, smooth_k=True,
                             smooth_q=False, layout="bhsd", cuda_available=False)


def test_sm_scale_default_and_numbers():
    assert resolve_sm_scale(None, 128) == 128 ** -0.5
    assert resolve_sm_scale(1, 64) == 1.0


def test_import_sage_does_not_import_torch():
    code = ("import sys; import sage, sage.attention_checks; "
            "import sage.kernels.sagebwd.launch; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT / "python")
