"""The memory stream as a LangGraph ``BaseStore``: :class:`GenerativeAgentsStore`.

Modules: :mod:`~langchain_genmem.langgraph_store.store` (the store and how it maps onto the
stream), :mod:`~langchain_genmem.langgraph_store.items` (the key records),
:mod:`~langchain_genmem.langgraph_store.namespaces` (labels and personas),
:mod:`~langchain_genmem.langgraph_store.indexing` (what is embedded),
:mod:`~langchain_genmem.langgraph_store.filters` (search filters) and
:mod:`~langchain_genmem.langgraph_store.ttl` (time to live).
"""

from langchain_genmem.langgraph_store.filters import TIME_FILTERS
from langchain_genmem.langgraph_store.items import REGISTRY
from langchain_genmem.langgraph_store.namespaces import InvalidNamespace, default_persona
from langchain_genmem.langgraph_store.store import GenerativeAgentsStore, Ranking

__all__ = ["REGISTRY", "TIME_FILTERS", "GenerativeAgentsStore", "InvalidNamespace", "Ranking",
           "default_persona"]
