"""Vocabulary: the words every layer uses.

Errors, time and the original simulation's time formats, text rules and limits,
tokens, the node and state types, the retrieval modes and value ranges, validation.
Imports nothing else of the package.
"""
