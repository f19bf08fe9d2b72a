"""LangGraph deployment entry points (``langgraph.json`` points here)."""
