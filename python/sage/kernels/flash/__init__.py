"""A 16-bit FlashAttention forward written in the sage language (issue #11's attention bar).

:mod:`sage.kernels.flash.kernels` holds the kernel (:func:`flash_forward`),
:mod:`sage.kernels.flash.ops` its torch entry point (:func:`flash_attention`)
and tile plans (:class:`FlashTiles`, :func:`default_tiles`).
"""
