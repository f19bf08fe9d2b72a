"""Generative Agents memory for LangChain and LangGraph."""
