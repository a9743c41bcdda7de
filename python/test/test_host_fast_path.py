"""The host fast paths of a warm call, without a GPU: the JIT's Launcher
(kernels kept by argument signature), the per-key caches of torch_ops (checks,
plans, launchers, scalar arguments) and sage.attention's call of the forward
without the custom op's dispatcher where nothing could see the op.

Each cache is tested against the field it must key on: a call that differs in
one of them must not reuse what an earlier call kept. The GPU is stood in for
by CPU tensors that report device 0, a compiled kernel with a made-up PTX
header and a loaded kernel that records its launches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import sage  # noqa: E402
import sage.attention_ops as attention_ops  # noqa: E402
import sage.jit.function as function  # noqa: E402
import sage.language as sl  # noqa: E402
from sage.attention_checks import AttentionArgumentError  # noqa: E402
from sage.jit import ArgumentError  # noqa: E402
from sage.jit.compiler import CompiledKernel  # noqa: E402
from sage.kernels.sagebwd import torch_ops  # noqa: E402
from sage.kernels.sagebwd.launch import (FORWARD_SEQUENCE, ForwardTiles, Tiles,  # noqa: E402
                                         constexprs, grids, runtime_args, stride_args)


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    pass


def strided_scale(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    pass


class Loaded:
    """A loaded kernel that records its launches."""

    def __init__(self, device: int):
        self.device, self.launches = device, []

    def launch(self, x, y, z, stream, args):
        self.launches.append(((x, y, z), args))


class FakeGpu:
    """Compiles by recording the call's keys (a made-up PTX header) and
    launches into :class:`Loaded` kernels, one per device."""

    def __init__(self):
        self.compiled, self.binds, self.loaded = [], 0, {}

    def compile(self, fn, name, params, keys, constexprs, arch, options):
        self.compiled.append((keys, dict(constexprs), options))
        ptx = f"// sage.kernel name={name} threads=128 shared_memory=0\n.version 8.4\n"
        kernel = CompiledKernel(name=name, key=str(len(self.compiled)), arch=arch,
                                num_warps=options.num_warps, maxnreg=options.maxnreg,
                                params=params, arg_keys=keys, constexprs=dict(constexprs),
                                stages={"ptx": ptx.encode()}, origin="compiled",
                                num_stages=options.num_stages, tensor_maps=options.tensor_maps)
        for device in (0, 1):
            kernel._loaded[device] = self.loaded.setdefault(device, Loaded(device))
        return kernel

    def launches(self, device: int = 0) -> list:
        return self.loaded[device].launches if device in self.loaded else []


@pytest.fixture
def gpu(monkeypatch) -> FakeGpu:
    fake = FakeGpu()
    monkeypatch.delenv("SAGE_INTERPRET", raising=False)
    monkeypatch.delenv("SAGE_ALWAYS_COMPILE", raising=False)
    monkeypatch.delenv("SAGE_TENSOR_MAPS", raising=False)
    monkeypatch.setattr(function, "compile_specialization", fake.compile)
    monkeypatch.setattr(function, "device_arch", lambda device: "sm_90a")
    monkeypatch.setattr(function, "current_stream", lambda device: 7)
    # CPU tensors stand for tensors on cuda:0 (devices() moves them).
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: DEVICES.get(id(self), 0))
    real_bind = function.JITFunction.bind

    def bind(self, args, kwargs, *, check_device=True):
        fake.binds += 1
        return real_bind(self, args, kwargs, check_device=check_device)
    monkeypatch.setattr(function.JITFunction, "bind", bind)
    yield fake
    DEVICES.clear()


#: id(tensor) -> the device it reports (default 0).
DEVICES: dict[int, int] = {}


def on(device: int, x):
    DEVICES[id(x)] = device
    return x


def tensors(n=64, dtype=torch.float32):
    return torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)


# -- the JIT's Launcher ----------------------------------------------------------


def test_a_repeated_launch_binds_once_and_passes_the_same_arguments(gpu):
    kernel = sage.jit(scale)
    x, y = tensors()
    for _ in range(3):
        kernel[(4,)](x, y, 64, 2.0, BLOCK=32)
    assert gpu.binds == 1 and len(gpu.compiled) == 1
    launches = gpu.launches()
    assert len(launches) == 3
    assert all(launch == ((4, 1, 1), (x.data_ptr(), y.data_ptr(), 64, 2.0))
               for launch in launches)


@pytest.mark.parametrize("change", [
    "dtype", "misaligned", "not_divisible", "int64", "float_for_int", "int_for_float",
    "device", "constexpr", "constexpr_type", "launch_option"])
def test_each_signature_field_selects_its_own_kernel(gpu, change):
    """A launch that differs in one field of the signature takes the full path
    and gets the key the full path gives it, not the earlier kernel."""
    kernel = sage.jit(scale)
    x, y = tensors()
    args, kwargs = [x, y, 64, 2.0], {"BLOCK": 32}
    kernel[(1,)](*args, **kwargs)
    if change == "dtype":
        args[:2] = tensors(dtype=torch.float16)
    elif change == "misaligned":
        args[0] = x[1:]  # 4 bytes past a 16-byte boundary
    elif change == "not_divisible":
        args[2] = 65
    elif change == "int64":
        args[2] = 2 ** 40
    elif change == "float_for_int":
        args[2] = 64.0
    elif change == "int_for_float":
        args[3] = 2
    elif change == "device":
        args[:2] = [on(1, t) for t in tensors()]
    elif change == "constexpr":
        kwargs["BLOCK"] = 64
    elif change == "constexpr_type":
        kwargs["BLOCK"] = True  # == 1 and hashes as 1: not the same launch
        kernel[(1,)](*args, BLOCK=1)
    else:
        kwargs["num_warps"] = 8
    binds = gpu.binds
    kernel[(1,)](*args, **kwargs)
    assert gpu.binds == binds + 1
    call = kernel.bind(tuple(args), dict(kwargs))  # what the full path made of it
    keys, constexprs_, options = gpu.compiled[-1]
    assert keys == call.keys and constexprs_ == call.constexprs and options == call.options
    device = 1 if change == "device" else 0
    assert gpu.launches(device)[-1][1] == call.launch_args
    # ... and the change's own signature is kept from now on.
    binds = gpu.binds
    kernel[(1,)](*args, **kwargs)
    assert gpu.binds == binds


@pytest.mark.parametrize("bad", ["non_contiguous", "host", "two_devices", "bool", "float64",
                                 "numpy"])
def test_bad_arguments_fail_every_time_after_a_good_launch(gpu, bad):
    import numpy as np

    kernel = sage.jit(scale)
    x, y = tensors(n=256)
    kernel[(1,)](x, y, 64, 2.0)
    args = [x, y, 64, 2.0]
    if bad == "non_contiguous":
        args[0], match = x[::2], "argument x is not contiguous"
    elif bad == "host":
        args[0], match = on(-1, torch.zeros(256)), "not in CUDA device memory"
    elif bad == "two_devices":
        args[1], match = on(1, torch.zeros(256)), "argument y is on cuda:1"
    elif bad == "bool":
        args[2], match = True, "argument n: expected a tensor, an int or a float"
    elif bad == "float64":
        args[0], match = torch.zeros(256, dtype=torch.float64), "dtype sage does not handle"
    else:
        args[0], match = np.zeros(256, np.float32), "not in CUDA device memory"
    for _ in range(2):
        with pytest.raises(ArgumentError, match=match):
            kernel[(1,)](*args)
    assert len(gpu.launches()) == 1


def test_strided_parameters_take_views(gpu):
    kernel = sage.jit(strided_scale, strided=("x",))
    x, y = tensors(n=256)
    for _ in range(2):
        kernel[(1,)](x[::2], y, 64, 2.0)
    assert gpu.binds == 1 and len(gpu.launches()) == 2


def test_environment_knobs_are_read_on_every_launch(gpu, monkeypatch):
    kernel = sage.jit(scale)
    x, y = tensors()
    kernel[(1,)](x, y, 64, 2.0)
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "device")  # another specialisation
    kernel[(1,)](x, y, 64, 2.0)
    assert len(gpu.compiled) == 2 and gpu.compiled[-1][2].tensor_maps is None
    monkeypatch.setenv("SAGE_ALWAYS_COMPILE", "1")
    kernel[(1,)](x, y, 64, 2.0)
    kernel[(1,)](x, y, 64, 2.0)
    assert len(gpu.compiled) == 4
    monkeypatch.delenv("SAGE_ALWAYS_COMPILE")
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    interpreted = []
    monkeypatch.setattr(function.JITFunction, "interpret",
                        lambda self, grid, *a, **k: interpreted.append(k))
    kernel[(1,)](x, y, 64, 2.0)
    assert len(gpu.launches()) == 4 and interpreted == [
        {"x": x, "y": y, "n": 64, "alpha": 2.0}]


def test_callable_grids_get_every_argument_by_name(gpu):
    kernel = sage.jit(scale)
    x, y = tensors()
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (meta["n"] // meta["BLOCK"],)
    for _ in range(2):
        kernel[grid](x, y, 64, 2.0, BLOCK=16)
    assert [launch[0] for launch in gpu.launches()] == [(4, 1, 1)] * 2
    assert seen[0] == seen[1] and {k: seen[1][k] for k in ("n", "alpha", "BLOCK")} == \
        {"n": 64, "alpha": 2.0, "BLOCK": 16}


def test_keyword_errors_are_those_of_the_full_path(gpu):
    kernel = sage.jit(scale)
    x, y = tensors()
    with pytest.raises(ArgumentError, match="scale has no parameter 'beta'"):
        kernel[(1,)](x, y, 64, 2.0, beta=1)
    with pytest.raises(ValueError, match="num_warps"):
        kernel[(1,)](x, y, 64, 2.0, num_warps=3)
    with pytest.raises(ArgumentError, match="argument n given twice"):
        kernel[(1,)](x, y, 64, 2.0, n=3)
    with pytest.raises(ArgumentError, match="n is a runtime argument"):
        kernel.launcher(n=3)
    with pytest.raises(ArgumentError, match=r"scale takes 4 runtime arguments"):
        kernel.launcher(BLOCK=16)[(1,)](x, y, 64)
    assert gpu.launches() == []


def test_launcher_is_shared_with_run(gpu):
    kernel = sage.jit(scale)
    x, y = tensors()
    launcher = kernel.launcher(BLOCK=32, num_warps=8)
    assert kernel.launcher(BLOCK=32, num_warps=8) is launcher
    assert kernel.launcher(BLOCK=32) is not launcher
    kernel[(1,)](x, y, 64, 2.0, BLOCK=32, num_warps=8)
    launcher[(1,)](x, y, 64, 2.0)
    assert gpu.binds == 1 and len(gpu.launches()) == 2
    assert launcher.options.num_warps == 8 and launcher.constexprs == {"BLOCK": 32}


# -- torch_ops' caches ---------------------------------------------------------------


def _qkv(b=1, h=2, hkv=1, n=32, n_kv=48, d=64, dtype=torch.bfloat16):
    return (torch.zeros(b, h, n, d, dtype=dtype), torch.zeros(b, hkv, n_kv, d, dtype=dtype),
            torch.zeros(b, hkv, n_kv, d, dtype=dtype))


PLAN_ARGS = dict(causal=False, sm_scale=0.125, smooth_k=True, smooth_q=False, scales="fine")


def test_plan_of_keys_on_the_device():
    """A plan is its device's: its launches (a persistent grid's size) and its
    tuned forward plan are made for that device."""
    q, k, _ = _qkv()
    meta_q, meta_k = q.to("meta"), k.to("meta")
    args = dict(PLAN_ARGS, tiles=Tiles(64, 64, 4))  # given tiles: nothing to tune
    on_cpu = torch_ops.plan_of(q, k, **args)
    on_meta = torch_ops.plan_of(meta_q, meta_k, **args)
    assert on_meta is not on_cpu and on_meta == on_cpu
    assert torch_ops.plan_of(meta_q, meta_k, **args) is on_meta
    assert torch_ops.plan_of(q, k, **args) is on_cpu


@pytest.mark.parametrize("change", [
    "batch", "heads", "kv_heads", "n", "n_kv", "d", "dtype", "causal", "causal_type",
    "sm_scale", "smooth_k", "smooth_q", "scales", "tiles"])
def test_plan_of_keys_on_every_field(change):
    q, k, _ = _qkv()
    first = torch_ops.plan_of(q, k, **PLAN_ARGS)
    assert torch_ops.plan_of(q, k, **PLAN_ARGS) is first
    args = dict(PLAN_ARGS)
    sizes = dict(b=1, h=2, hkv=1, n=32, n_kv=48, d=64, dtype=torch.bfloat16)
    key = {"batch": "b", "heads": "h", "kv_heads": "hkv", "n": "n", "n_kv": "n_kv",
           "d": "d"}.get(change)
    if key:
        sizes[key] = {"b": 2, "h": 4, "hkv": 2, "n": 33, "n_kv": 64, "d": 128}[key]
    elif change == "dtype":
        sizes["dtype"] = torch.float16
    elif change == "causal_type":
        torch_ops.plan_of(q, k, **dict(args, causal=True))
        args["causal"] = 1
    elif change == "tiles":
        args["tiles"] = Tiles(64, 32, 4, forward=ForwardTiles(64, 4))
    else:
        args[change] = {"causal": True, "sm_scale": 0.25, "smooth_k": False,
                        "smooth_q": True, "scales": "block"}[change]
    q2, k2, _ = _qkv(**sizes)
    plan = torch_ops.plan_of(q2, k2, **args)
    batch, heads, n, d = q2.shape
    want = torch_ops.Plan(torch_ops.Shape(batch, heads, k2.shape[1], n, k2.shape[2], d),
                          args.get("tiles") or torch_ops.default_tiles(
                              d, args["smooth_q"], args["scales"] == "fine", args["causal"]),
                          args["causal"], args["sm_scale"], args["smooth_k"], args["smooth_q"],
                          q2.dtype, args["scales"])
    assert plan is not first and plan == want
    assert type(plan.causal) is type(args["causal"])


CHECK_ARGS = dict(causal=False, sm_scale=None, smooth_k=True, smooth_q=False, layout="bhsd",
                  scales="fine", interpret=True)


def test_check_tensors_keeps_good_calls_only(monkeypatch):
    checks = []
    real = torch_ops.check_attention_args
    monkeypatch.setattr(torch_ops, "check_attention_args",
                        lambda *a, **k: checks.append(1) or real(*a, **k))
    q, k, v = _qkv(n=17)
    problem = torch_ops.check_tensors(q, k, v, **CHECK_ARGS)
    assert torch_ops.check_tensors(q, k, v, **CHECK_ARGS) is problem and len(checks) == 1
    assert problem.sm_scale == 64 ** -0.5 and problem.shape.n == 17
    # A call that fails is checked, and fails, every time.
    for _ in range(2):
        with pytest.raises(AttentionArgumentError, match="argument causal: must be a bool"):
            torch_ops.check_tensors(q, k, v, **dict(CHECK_ARGS, causal=0))
    assert len(checks) == 3
    assert torch_ops.check_tensors(q, k, v, **dict(CHECK_ARGS, memo=False)) == problem
    assert len(checks) == 4


@pytest.mark.parametrize("change, match", [
    ("k_dtype", "argument k: has dtype float16, q bfloat16"),
    ("v_shape", "argument v: must have k's shape"),
    ("device", "argument q: is on meta"),
    ("interpret", "argument q: is on cpu"),
    ("causal_int", "argument causal: must be a bool, got int 1"),
    ("smooth_k_int", "argument smooth_k: must be a bool, got int 1"),
    ("sm_scale_bool", "argument sm_scale: must be a positive float or None, got bool"),
    ("layout", "argument layout: must be one of"),
    ("scales", "argument scales: must be one of"),
    ("causal_n", "argument causal: causal attention needs seq <= seq_kv"),
])
def test_check_tensors_memo_misses_on_every_field(change, match):
    """After the good call of each field's value, the bad one still raises."""
    q, k, v = _qkv(n=64, n_kv=48)
    args = dict(CHECK_ARGS)
    good = dict(args)
    if change == "k_dtype":
        k = k.half()
    elif change == "v_shape":
        v = v[:, :, 1:]
    elif change == "device":
        q, k, v = (x.to("meta") for x in (q, k, v))
    elif change == "interpret":
        args["interpret"] = False
    elif change == "causal_int":
        good["causal"], args["causal"] = True, 1
        q = q[:, :, :40]
    elif change == "smooth_k_int":
        good["smooth_k"], args["smooth_k"] = True, 1
    elif change == "sm_scale_bool":
        good["sm_scale"], args["sm_scale"] = 1, True
    elif change == "layout":
        args["layout"] = "bsdh"
    elif change == "scales":
        args["scales"] = "coarse"
    elif change == "causal_n":
        args["causal"] = True
    good_q, good_k, good_v = _qkv(n=40 if change == "causal_int" else 64, n_kv=48)
    torch_ops.check_tensors(good_q, good_k, good_v, **good)
    with pytest.raises(AttentionArgumentError, match=match):
        torch_ops.check_tensors(q, k, v, **args)


def test_no_cuda_hint_is_asked_only_when_checking(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(1) or False)
    q, k, v = _qkv(n=19)
    torch_ops.check_tensors(q, k, v, **dict(CHECK_ARGS, cuda_available=None))
    torch_ops.check_tensors(q, k, v, **dict(CHECK_ARGS, cuda_available=None))
    assert asked == [1]
    with pytest.raises(AttentionArgumentError, match="no CUDA device is available"):
        torch_ops.check_tensors(q, k, v, **dict(CHECK_ARGS, interpret=False,
                                                cuda_available=None))


def test_scalar_values_key_on_plan_and_strides():
    q, k, v = _qkv(n=32, n_kv=32, hkv=2)
    plan = torch_ops.plan_of(q, k, **PLAN_ARGS)
    other = torch_ops.plan_of(q, k, **dict(PLAN_ARGS, sm_scale=0.25))
    for x in (q, q.transpose(1, 2).contiguous().transpose(1, 2), q[:, :, :, :]):
        for p in (plan, other):
            values = torch_ops._scalar_values(p, {"q": x, "k": k, "v": v, "o": q})
            assert values["qk_scale"] == torch_ops.scalar_args(p.shape, p.sm_scale)["qk_scale"]
            assert {n: values[n] for n in ("stride_qb", "stride_qh", "stride_qn")} == \
                stride_args("q", torch_ops.strides_of(x))
            assert values["q"] is x
    with pytest.raises(ValueError, match="the last dimension must have stride 1"):
        torch_ops._scalar_values(plan, {"q": q, "k": k, "v": v, "o": q.transpose(2, 3)})


@pytest.mark.parametrize("causal, smooth_q, scales, d", [
    (False, False, "fine", 64), (True, False, "fine", 64), (False, True, "fine", 128),
    (True, False, "block", 128)])
def test_launches_pass_what_the_launch_helpers_give(monkeypatch, causal, smooth_q, scales, d):
    """Every kernel of the forward gets the grid, constexprs, options and
    runtime arguments that launch.py's helpers give for its plan."""
    q, k, v = _qkv(n=40, n_kv=80, d=d)
    plan = torch_ops.plan_of(q, k, **dict(PLAN_ARGS, causal=causal, smooth_q=smooth_q,
                                          scales=scales))
    got = []
    monkeypatch.setattr(function.Launcher, "launch",
                        lambda self, grid, args: got.append((self, grid, args)))
    values, _ = torch_ops._forward_values(plan, q, k, v, torch.empty_like(q), q.device)
    sequence = FORWARD_SEQUENCE
    torch_ops._launch(sequence, plan, values, torch.device("cuda", 0))
    flags = dict(fine_scales=plan.fine, smooth_q=plan.smooth_q)
    all_grids = grids(plan.shape, plan.tiles, **flags)
    assert [launcher.function.name for launcher, _, _ in got] == list(sequence)
    for (launcher, grid, args), name in zip(got, sequence):
        assert launcher.function is torch_ops.JIT_KERNELS[name]
        assert grid[:len(all_grids[name])] == tuple(all_grids[name]) and len(grid) == 3
        assert list(args) == runtime_args(name, values)
        assert launcher.kwargs == dict(plan.tiles.options(name, **flags, shape=plan.shape),
                                       **constexprs(
            name, plan.shape, plan.tiles, causal=causal, smooth_k=True, smooth_q=smooth_q,
            fine_scales=plan.fine))
    with pytest.raises(KeyError, match="quantize_kv_kernel: no value for k_mean"):
        torch_ops._launch(sequence, plan, {n: x for n, x in values.items() if n != "k_mean"},
                          torch.device("cuda", 0))


def test_a_persistent_grid_is_sized_by_the_launch_device(monkeypatch):
    """A persistent forward plan's grid holds the programs of the device the
    kernels launch on (not the current device's), one multiprocessor's for
    the interpreter; a plan's launches are kept per device."""
    q, k, v = _qkv(n=512, n_kv=512, d=128)
    persistent = ForwardTiles(64, 4, maxnreg=168, block_n=128, skewed=False, tma_store=True,
                              persistent=True)
    plan = torch_ops.plan_of(q, k, **dict(PLAN_ARGS, tiles=Tiles(64, 64, 8, forward=persistent)))
    asked = []
    monkeypatch.setattr(torch_ops, "sm_count", lambda device: asked.append(device) or 2 + device)
    got = []
    monkeypatch.setattr(function.Launcher, "launch",
                        lambda self, grid, args: got.append((self.function.name, grid)))
    values, _ = torch_ops._forward_values(plan, q, k, v, torch.empty_like(q), q.device)
    sequence = FORWARD_SEQUENCE
    per_sm = persistent.programs_per_sm()
    tiles = 512 // 64 * 2 * 1  # query blocks x heads x batch
    for index in (3, 0, 3):
        torch_ops._launch(sequence, plan, values, torch.device("cuda", index))
        assert got[-1] == ("sagebwd_forward", (min(tiles, (2 + index) * per_sm), 1, 1))
    assert asked == [3, 0]  # made once per device
    assert torch_ops._persistent_sms(plan, torch.device("cpu")) == 1
    default = torch_ops.plan_of(q, k, **dict(PLAN_ARGS, tiles=Tiles(64, 64, 4)))
    assert torch_ops._persistent_sms(default, torch.device("cuda", 3)) == 0


# -- sage.attention without the op's dispatcher --------------------------------------


def _inputs(requires_grad=False, layout="bshd"):
    gen = torch.Generator().manual_seed(0)
    shapes = [(1, 20, 2, 64), (1, 30, 1, 64), (1, 30, 1, 64)]
    if layout == "bhsd":
        shapes = [(b, h, n, d) for b, n, h, d in shapes]
    return [torch.randn(s, generator=gen).bfloat16().requires_grad_(requires_grad)
            for s in shapes]


def test_op_unobserved_only_where_nothing_sees_the_op():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    q, k, v = _inputs()
    assert attention_ops.op_unobserved(q, k, v)
    grad = _inputs(requires_grad=True)
    assert not attention_ops.op_unobserved(*grad)
    with torch.no_grad():
        assert attention_ops.op_unobserved(*grad)
    assert not attention_ops.op_unobserved(torch.nn.Parameter(q, requires_grad=False), k, v)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert not attention_ops.op_unobserved(q, k, v)
    with torch.device("cpu"):  # a torch function mode
        assert not attention_ops.op_unobserved(q, k, v)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert not attention_ops.op_unobserved(q, k, v)
    with FakeTensorMode():
        assert not attention_ops.op_unobserved(q, k, v)
    with FunctionalTensorMode():
        assert not attention_ops.op_unobserved(q, k, v)
    seen = []

    def record(x):
        seen.append(attention_ops.op_unobserved(x, x, x))
        return x * 2
    torch.vmap(record)(q)
    torch.func.grad(lambda x: record(x).sum())(q.float())
    torch.jit.trace(record, (q,), check_trace=False)
    assert seen == [False] * 3
    with torch.inference_mode():
        assert attention_ops.op_unobserved(q, k, v)
    assert attention_ops.op_unobserved(q, k, v)


def test_eager_forward_equals_the_op_and_observers_see_the_op(monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    monkeypatch.setenv("SAGE_INTERPRET", "1")
    for layout in ("bshd", "bhsd"):
        q, k, v = _inputs(layout=layout)
        direct = sage.attention(q, k, v, causal=True, layout=layout)
        op = torch.ops.sage.attention_fwd(q, k, v, True, 64 ** -0.5, True, False, layout,
                                          "fine")[0]
        assert torch.equal(direct, op) and direct.is_contiguous() and direct.grad_fn is None

    seen = []

    class Recording(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))
    q, k, v = _inputs()
    with Recording():
        observed = sage.attention(q, k, v, layout="bshd")
    assert "sage.attention_fwd.default" in seen
    assert torch.equal(observed, sage.attention(q, k, v, layout="bshd"))
    # With grad the op (and autograd) runs, and the gradient flows.
    q, k, v = _inputs(requires_grad=True)
    o = sage.attention(q, k, v, layout="bshd")
    assert o.grad_fn is not None
    o.sum().backward()
    assert q.grad is not None and k.grad is not None


def test_eager_autograd_only_where_nothing_but_autograd_sees_the_op():
    from torch.utils._python_dispatch import TorchDispatchMode

    q, k, v = _inputs(requires_grad=True)
    assert attention_ops.eager_autograd(q, k, v)
    assert not attention_ops.eager_autograd(*_inputs())  # no graph: op_unobserved's
    with torch.no_grad():
        assert not attention_ops.eager_autograd(q, k, v)
    assert not attention_ops.eager_autograd(torch.nn.Parameter(q.detach()), k, v)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert not attention_ops.eager_autograd(q, k, v)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert not attention_ops.eager_autograd(q, k, v)


def test_eager_autograd_node_equals_the_op_and_its_gradients(monkeypatch):
    """With grad, an eager call records EagerAttention's node (no dispatcher)
    whose O and gradients are the op's bit for bit, its backward running
    the op's implementation directly; a dispatch mode sees both ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    monkeypatch.setenv("SAGE_INTERPRET", "1")
    flags = (True, 64 ** -0.5, True, False, "bshd", "fine")
    q, k, v = _inputs(requires_grad=True)
    o = sage.attention(q, k, v, causal=True, layout="bshd")
    assert type(o.grad_fn).__name__ == "EagerAttentionBackward"
    do = torch.randn(o.shape, generator=torch.Generator().manual_seed(1)).bfloat16()
    grads = torch.autograd.grad(o, (q, k, v), do)
    with monkeypatch.context() as patch:  # the eager backward skips the op
        patch.setattr(attention_ops, "attention_bwd", None)
        assert torch.equal(torch.autograd.grad(
            sage.attention(q, k, v, causal=True, layout="bshd"), q, do)[0], grads[0])
    q2, k2, v2 = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    o2 = torch.ops.sage.attention_fwd(q2, k2, v2, *flags)[0]
    assert "EagerAttention" not in type(o2.grad_fn).__name__
    assert torch.equal(o, o2)
    for got, want in zip(grads, torch.autograd.grad(o2, (q2, k2, v2), do)):
        assert torch.equal(got, want)
    seen = []

    class Recording(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))
    with Recording():
        observed = sage.attention(q, k, v, causal=True, layout="bshd")
        torch.autograd.grad(observed, (q, k, v), do)
    assert "sage.attention_fwd.default" in seen and "sage.attention_bwd.default" in seen
    # Only inputs that require grad get one (k alone here).
    k3 = k.detach().clone().requires_grad_(True)
    o3 = sage.attention(q.detach(), k3, v.detach(), causal=True, layout="bshd")
    o3.backward(do)
    assert torch.equal(k3.grad, grads[1])
