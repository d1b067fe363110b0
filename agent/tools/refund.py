"""``issue_refund``: the demo's side-effecting tool, and the ledger it writes to.

The ledger is a SQLite table keyed by an idempotency key (the turn id), so a refund that
was approved once is issued once, even if the node runs again.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from langchain_core.tools import tool

MAX_REFUND = 500.0


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Refund `amount` dollars on order `order_id` to the original payment method."""
    raise NotImplementedError("the agent runs refunds through RefundLedger.issue")


@dataclass(frozen=True, slots=True)
class Refund:
    refund_id: str
    order_id: str
    amount: float
    created: bool  # False when the idempotency key had already issued it


class RefundError(Exception):
    pass


class RefundLedger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS refunds (idempotency_key TEXT PRIMARY KEY, "
            "refund_id TEXT NOT NULL, order_id TEXT NOT NULL, amount REAL NOT NULL, "
            "created_at REAL NOT NULL)"
        )

    def issue(self, order_id: str, amount: float, idempotency_key: str) -> Refund:
        if not 0 < amount <= MAX_REFUND:
            raise RefundError(f"refunds must be between $0.01 and ${MAX_REFUND:.0f}")
        with self._lock:
            row = self._db.execute(
                "SELECT refund_id, order_id, amount FROM refunds WHERE idempotency_key = ?",
                (idempotency_key,)).fetchone()
            if row:
                return Refund(row[0], row[1], row[2], created=False)
            refund_id = f"R-{order_id}-{int(time.time() * 1000) % 100000:05d}"
            self._db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?)",
                             (idempotency_key, refund_id, order_id, amount, time.time()))
            return Refund(refund_id, order_id, amount, created=True)

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM refunds").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
