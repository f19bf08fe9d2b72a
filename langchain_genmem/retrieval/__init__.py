"""Retrieval: the weighted retrieval of Generative Agents as a LangChain retriever.

Ranked in process or in the database, reported, returned as Documents. Stands on
memory and everything below it.
"""
