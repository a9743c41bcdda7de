"""Global scratch (``global_scratch=`` in the PTX header): the kernel's hidden
last pointer argument, its signature letter and its allocation at launch.
No GPU, no torch: a fake torch module and a fake loaded kernel stand in."""

from __future__ import annotations

import sys
import types
import weakref

import pytest

from sage.jit.compiler import CompiledKernel
from sage.jit.function import BoundCall, launch
from sage.jit.launcher import global_scratch
from sage.jit.options import LaunchOptions
from sage.jit.specialize import ArgKey

KEYS = (ArgKey("pointer", "float16", True), ArgKey("pointer", "float32", True),
        ArgKey("int32", None, True))
STREAM = 7
ADDRESS = 0x7f00_0000_0200  # 512-byte aligned, as torch's allocator gives


def compiled(scratch: int | None) -> CompiledKernel:
    """A CompiledKernel of kernel ``k`` whose PTX header has ``scratch`` (None:
    a header without the field)."""
    field = "" if scratch is None else f" global_scratch={scratch}"
    ptx = f"// sage.kernel name=k threads=128 shared_memory=0{field}\n.version 8.3\n"
    return CompiledKernel(name="k", key="0" * 64, arch="sm_90a", num_warps=4, maxnreg=None,
                          params=(), arg_keys=KEYS, constexprs={}, stages={"ptx": ptx.encode()},
                          origin="compiled")


class FakeTensor:
    def __init__(self, nbytes: int, dtype: str, device: tuple, address: int):
        self.nbytes, self.dtype, self.device, self.address = nbytes, dtype, device, address

    def data_ptr(self) -> int:
        return self.address


class FakeTorch(types.ModuleType):
    """What the launcher uses of torch: empty, uint8, device, the raw stream."""

    def __init__(self, address: int = ADDRESS):
        super().__init__("torch")
        self.uint8 = "uint8"
        self.address = address
        self.allocated: list[weakref.ref] = []
        self._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: STREAM)

    def device(self, kind: str, index: int) -> tuple:
        return (kind, index)

    def empty(self, nbytes: int, *, dtype: str, device: tuple) -> FakeTensor:
        tensor = FakeTensor(nbytes, dtype, device, self.address)
        self.allocated.append(weakref.ref(tensor))
        return tensor


class FakeLoaded:
    """A loaded kernel: checks the arguments against the signature and
    records each launch (and whether the scratch was alive then)."""

    def __init__(self, signature: str, torch: FakeTorch):
        self.signature, self.torch, self.launches = signature, torch, []

    def launch(self, x: int, y: int, z: int, stream: int, args: tuple) -> None:
        assert len(args) == len(self.signature)
        alive = [ref() is not None for ref in self.torch.allocated]
        self.launches.append(((x, y, z), stream, args, alive))


@pytest.fixture
def torch(monkeypatch) -> FakeTorch:
    fake = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake


def run(kernel: CompiledKernel, grid: tuple, torch: FakeTorch, device: int = 0):
    loaded = FakeLoaded(kernel.signature, torch)
    kernel._loaded[device] = loaded
    call = BoundCall({}, {}, KEYS, (0x1000, 0x2000, 64), device, LaunchOptions(4))
    launch(kernel, grid, call)
    return loaded, call


def test_signature_gets_a_trailing_pointer_with_scratch():
    assert compiled(256).signature == "PPiP"
    assert compiled(0).signature == "PPi"
    assert compiled(None).signature == "PPi"


def test_launch_appends_the_scratch_pointer(torch):
    loaded, _ = run(compiled(256), (3, 2, 1), torch, device=1)
    ((dims, stream, args, alive),) = loaded.launches
    assert dims == (3, 2, 1) and stream == STREAM
    assert args == (0x1000, 0x2000, 64, ADDRESS)
    (tensor_ref,) = torch.allocated
    assert alive == [True]  # held until the launch was enqueued
    # Released afterwards (the fake tensor is gone once launch() returned).
    assert tensor_ref() is None


def test_scratch_is_programs_times_bytes_on_the_kernel_device(monkeypatch):
    sizes = []

    class Recording(FakeTorch):
        def empty(self, nbytes, *, dtype, device):
            sizes.append((nbytes, dtype, device))
            return super().empty(nbytes, dtype=dtype, device=device)
    monkeypatch.setitem(sys.modules, "torch", Recording())
    run(compiled(384), (5, 3, 2), sys.modules["torch"], device=2)
    assert sizes == [(5 * 3 * 2 * 384, "uint8", ("cuda", 2))]


def test_no_scratch_allocates_nothing_and_passes_the_arguments_as_they_are(torch):
    loaded, call = run(compiled(0), (4, 1, 1), torch)
    ((_, _, args, _),) = loaded.launches
    assert args is call.launch_args
    assert torch.allocated == []


def test_empty_grid_launches_and_allocates_nothing(torch):
    loaded, _ = run(compiled(256), (0, 1, 1), torch)
    assert loaded.launches == [] and torch.allocated == []


def test_misaligned_scratch_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(address=ADDRESS + 64))
    with pytest.raises(RuntimeError, match="not 128-byte aligned"):
        global_scratch(0, 256)


def test_scratch_without_torch_or_cupy_is_a_clear_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    with pytest.raises(RuntimeError, match="needs global scratch memory"):
        global_scratch(0, 256)
