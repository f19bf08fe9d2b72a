"""Memory: one persona's stream of events, thoughts and chats.

:class:`~langchain_genmem.memory.stream.MemoryStream`, its in-process cache, the input
records, the keyword index, the default embedding model and the exit flush. Stands on
:mod:`langchain_genmem.backends` (storage), numerics and vocabulary.
"""
