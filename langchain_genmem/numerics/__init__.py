"""Numerics: pure scoring over columns of numbers.

Exact vectorised scoring, the int8 first pass, the lexical (BM25) index and the
candidate filter. Imports only :mod:`langchain_genmem.core`.
"""
