"""Adapters that plug :func:`sage.attention` into other libraries
(:mod:`sage.integrations.transformers`). Each imports its library only when
used."""
