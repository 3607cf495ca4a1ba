"""The stage store: immutable Parquet snapshots plus a DuckDB catalog."""

from essaybench.store.lock import StoreBusyError
from essaybench.store.store import Snapshot, StageRun, Store

__all__ = ["Snapshot", "StageRun", "Store", "StoreBusyError"]
