"""GEMMs written in the sage language: the schedules' proving ground (issue #11).

:mod:`sage.kernels.gemm.kernels` holds the kernels (INT8 with exact int32
accumulation, and 16-bit with f32 accumulation), :mod:`sage.kernels.gemm.ops`
their torch entry points (:func:`int8_mm`, :func:`half_mm`).
"""
