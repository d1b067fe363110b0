"""The demo's refund ledger refunds only the requesting user's orders, whatever the node
before it decided: the ledger is the last check, and it holds on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from span_relay_demo.tools.refund import DEMO_ORDERS, GUEST, NotYourOrder, RefundLedger


def test_only_the_owner_of_an_order_gets_its_refund(tmp_path: Path) -> None:
    ledger = RefundLedger(tmp_path / "refunds.db")
    try:
        assert ledger.owner_of("2001") == "alice" and ledger.owner_of("1234") == GUEST
        assert ledger.owner_of("9999") is None
        for order, user in (("2001", "bob"), ("1234", "alice"), ("9999", GUEST), ("2001", GUEST)):
            with pytest.raises(NotYourOrder):
                ledger.issue(order, 10.0, f"turn-{order}-{user}", user)
        assert ledger.count() == 0
        refund = ledger.issue("2001", 10.0, "turn-1", "alice")
        assert refund.created and refund.order_id == "2001"
        assert ledger.issue("1234", 5.0, "turn-2").created  # no users: the guest's orders
        assert ledger.count() == 2
    finally:
        ledger.close()


def test_the_orders_survive_a_reopen(tmp_path: Path) -> None:
    RefundLedger(tmp_path / "refunds.db").close()
    ledger = RefundLedger(tmp_path / "refunds.db")  # seeding again changes nothing
    try:
        assert {o: ledger.owner_of(o) for o in DEMO_ORDERS} == DEMO_ORDERS
    finally:
        ledger.close()
