"""``issue_refund``: the demo's side-effecting tool, and the ledger it writes to.

The ledger is a SQLite table keyed by an idempotency key (the turn id), so a refund that
was approved once is issued once, even if the node runs again. Orders have owners: a
refund is issued only on an order of the user the turn acts for
(``config["configurable"]["user"]``, RELAY_AUTH=jwt or proxy); a relay without users
acts for :data:`GUEST`. The demo's orders are :data:`DEMO_ORDERS`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from langchain_core.tools import tool

MAX_REFUND = 500.0
#: whom the demo acts for when requests have no user (RELAY_AUTH none or token)
GUEST = "guest"
#: the demo shop's orders and their owners: the guest's, and two users' for trying
#: RELAY_AUTH=jwt or proxy (a token whose ``sub`` is ``alice`` may refund 2001, not 1234)
DEMO_ORDERS = {"1234": GUEST, "1001": GUEST, "2001": "alice", "2002": "alice", "3001": "bob"}


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


class NotYourOrder(RefundError):
    """The order is not the requesting user's (or does not exist): refused, not failed."""


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
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, owner TEXT NOT NULL)"
        )
        self._db.executemany(
            "INSERT OR IGNORE INTO orders VALUES (?, ?)", list(DEMO_ORDERS.items())
        )

    def owner_of(self, order_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT owner FROM orders WHERE order_id = ?", (order_id,)
            ).fetchone()
        return str(row[0]) if row else None

    def issue(
        self, order_id: str, amount: float, idempotency_key: str, user_id: str = GUEST
    ) -> Refund:
        if not 0 < amount <= MAX_REFUND:
            raise RefundError(f"refunds must be between $0.01 and ${MAX_REFUND:.0f}")
        if self.owner_of(order_id) != user_id:
            raise NotYourOrder(f"order {order_id} is not one of your orders")
        with self._lock:
            row = self._db.execute(
                "SELECT refund_id, order_id, amount FROM refunds WHERE idempotency_key = ?",
                (idempotency_key,),
            ).fetchone()
            if row:
                return Refund(row[0], row[1], row[2], created=False)
            refund_id = f"R-{order_id}-{int(time.time() * 1000) % 100000:05d}"
            self._db.execute(
                "INSERT INTO refunds VALUES (?, ?, ?, ?, ?)",
                (idempotency_key, refund_id, order_id, amount, time.time()),
            )
            return Refund(refund_id, order_id, amount, created=True)

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM refunds").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
