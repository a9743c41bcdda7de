"""The launch options of a ``@sage.jit`` kernel: ``num_warps``, ``maxnreg``,
``num_stages``, ``tensor_maps`` and ``num_ctas``, the keyword arguments of a launch
(``kernel[grid](..., num_warps=8)``) that are not kernel parameters.

They travel through the JIT as one :class:`LaunchOptions`: part of the
specialisation key, recorded on the compiled kernel and handed to
``sl.trace``. A new option is a new field here (and a keyword of
``sl.trace``), not a new argument of every function on the way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any

#: Warps per program when a launch does not say.
DEFAULT_NUM_WARPS = 4
#: The register cap when a launch does not say: none (ptxas takes what it needs).
DEFAULT_MAXNREG = None
#: The stages of an ``sl.range`` loop that gives none, when a launch does not
#: say: 1, not pipelined.
DEFAULT_NUM_STAGES = 1


@dataclass(frozen=True)
class LaunchOptions:
    """The launch options of one specialisation (validated when made).

    Attributes:
        num_warps: warps per program (1, 2, 4, 8, 16).
        maxnreg: a cap on registers per thread (24-255), or None.
        num_stages: the stages of every ``sl.range`` loop that does not pass
            ``num_stages`` itself (an int >= 1; 1: not pipelined).
        tensor_maps: where the TMA tensor maps are built, "host" (encoded
            by the launcher where the arguments determine them) or "device"
            (by every program); None: as SAGE_TENSOR_MAPS says.
        num_ctas: programs per thread-block cluster along grid axis 0
            (1-8; 1: no clusters). The grid's first size must be a
            multiple; ``sl.cluster_barrier`` synchronises a cluster.

    Raises:
        ValueError: naming the option that is out of range.
    """

    num_warps: int = DEFAULT_NUM_WARPS
    maxnreg: int | None = DEFAULT_MAXNREG
    num_stages: int = DEFAULT_NUM_STAGES
    tensor_maps: str | None = None
    num_ctas: int = 1
    # Hashed on every launch (the in-memory key): computed once.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # sage.language imports numpy, which importing sage.jit does not need.
        from sage.language.tracer import check_launch_options
        values = self.trace_kwargs()
        check_launch_options(**values)
        object.__setattr__(self, "_hash", hash(tuple(values.values())))

    def __hash__(self) -> int:
        return self._hash

    def trace_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of ``sl.trace``."""
        return {name: getattr(self, name) for name in NAMES}

    def describe(self) -> str:
        """The options in words, for errors: ``num_warps=4, maxnreg=None,
        num_stages=1, tensor_maps=None and num_ctas=1``."""
        words = [f"{name}={value!r}" for name, value in self.trace_kwargs().items()]
        return f"{', '.join(words[:-1])} and {words[-1]}"


#: The option names, as launches and ``sl.trace`` spell them.
NAMES = tuple(f.name for f in fields(LaunchOptions) if f.init)
_NAME_SET = frozenset(NAMES)
_UNSET = object()
# Options by the values a launch gave (and their types: True == 1 must not
# find 1's), so that a launch makes no new object (~3 us) once its options are
# known. The defaults are made on first use too: making options imports
# sage.language (numpy), which importing sage.jit does not.
_KNOWN: dict[tuple, LaunchOptions] = {}


@functools.lru_cache(maxsize=None)
def default_options() -> LaunchOptions:
    """The options of a launch that gives none."""
    return LaunchOptions()


def pop_launch_options(kwargs: dict[str, Any]) -> LaunchOptions:
    """Removes the launch options from a call's keyword arguments and returns
    them (defaults for those not given). Runs on every launch: one set test
    when none is given, else a dict lookup once these options are known.

    Raises:
        ValueError: for an option out of range.
    """
    if _NAME_SET.isdisjoint(kwargs):
        return default_options()
    values = tuple([kwargs.pop(name, _UNSET) for name in NAMES])
    memo = values + tuple(map(type, values))
    try:
        known = _KNOWN.get(memo)
    except TypeError:  # an unhashable value: invalid, as the constructor says
        known = None
    if known is None:
        known = LaunchOptions(**{name: value for name, value in zip(NAMES, values)
                                 if value is not _UNSET})
        _KNOWN[memo] = known
    return known

