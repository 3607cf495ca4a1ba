"""Batch mode: calls through providers' batch APIs (OpenAI Batch, Anthropic Message
Batches) at their batch price, durable across a killed process (``runner``)."""

from essaybench.llm.batch.options import BatchOptions, OnExpired
from essaybench.llm.batch.runner import BatchRunner
from essaybench.llm.batch.ticket import BatchError, BatchTicket, Pending

__all__ = ["BatchError", "BatchOptions", "BatchRunner", "BatchTicket", "OnExpired", "Pending"]
