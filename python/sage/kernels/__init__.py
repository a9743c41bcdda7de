"""Kernels written in the sage kernel language (:mod:`sage.language`).

Each subpackage holds the kernels of one product as plain module-level
functions (pointers, integer lengths, ``sl.constexpr`` parameters), to be
run with ``sl.interpret``, traced with ``sl.trace`` or wrapped by ``@sage.jit``.
"""
