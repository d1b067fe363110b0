"""span_relay_demo.model: the offline, deterministic support model and build_model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from span_relay_demo.model import OFFLINE_MODEL_NAME, OfflineSupportModel, build_model
from span_relay_demo.nodes.generate import SYSTEM
from span_relay_demo.retrieval import KnowledgeBase
from span_relay_demo.tools.refund import issue_refund

REFUND_MESSAGE = "Please refund order 1234 ($20)."


def prompt(question: str, passages: list[tuple[str, str, str]]) -> list:
    context = "\n".join(f"[{doc_id}] {title}\n{text}" for doc_id, title, text in passages)
    return [SystemMessage(SYSTEM), HumanMessage(f"{question}\n\nContext:\n{context}")]


PASSAGES = [
    (
        "refund-policy",
        "Refund policy",
        "Refunds are issued within 5 business days. They go to the original method. Extra.",
    ),
    ("refund-timing", "Refund timing", "Banks take 3-10 days. Then it shows. More."),
    ("exchanges", "Exchanges", "Exchanges are free. Really."),
]


def test_answer_cites_passages_and_is_deterministic() -> None:
    model = OfflineSupportModel()
    first = model.invoke(prompt("How do refunds work?", PASSAGES))
    second = OfflineSupportModel().invoke(prompt("How do refunds work?", PASSAGES))
    assert isinstance(first, AIMessage)
    assert first.content == second.content
    assert first.content == (
        "Refunds are issued within 5 business days. They go to the original method. "
        "[refund-policy] Banks take 3-10 days. Then it shows. [refund-timing]"
    )
    assert "[exchanges]" not in first.content  # max_passages = 2
    assert first.tool_calls == []
    assert first.response_metadata["model_name"] == OFFLINE_MODEL_NAME


def test_answer_from_the_real_knowledge_base() -> None:
    kb = KnowledgeBase()
    hits = kb.search("How do refunds work?")
    reply = OfflineSupportModel().invoke(
        prompt("How do refunds work?", [(p.doc_id, p.title, p.text) for p in hits])
    )
    assert "[refund-policy]" in reply.content
    assert reply.content.index("[refund-policy]") == reply.content.index("[")


def test_no_context_gives_the_fallback() -> None:
    reply = OfflineSupportModel().invoke(prompt("What is the meaning of life?", []))
    assert "could not find" in reply.content
    assert "support@larkspur.example" in reply.content


def test_refund_is_proposed_only_when_the_tool_is_bound() -> None:
    messages = prompt(REFUND_MESSAGE, PASSAGES)
    bound = OfflineSupportModel().bind_tools([issue_refund])
    reply = bound.invoke(messages)
    assert reply.content == ""
    assert reply.tool_calls == [
        {
            "name": "issue_refund",
            "args": {"order_id": "1234", "amount": 20.0},
            "id": "call_refund_1234",
            "type": "tool_call",
        }
    ]
    unbound = OfflineSupportModel().invoke(messages)
    assert unbound.tool_calls == []
    assert "[refund-policy]" in unbound.content


def test_refund_rule_reads_only_the_question_not_the_context() -> None:
    passages = [("x", "X", "To refund order 99 for $5 write to us.")]
    reply = (
        OfflineSupportModel()
        .bind_tools([issue_refund])
        .invoke(prompt("How do refunds work?", passages))
    )
    assert reply.tool_calls == []


@pytest.mark.parametrize(
    ("message", "order", "amount"),
    [
        ("refund order #A-77 for $12.50 please", "A-77", 12.5),
        ("Can you REFUND my order 555, it was $ 3", "555", 3.0),
    ],
)
def test_refund_rule_variants(message: str, order: str, amount: float) -> None:
    reply = OfflineSupportModel().bind_tools([issue_refund]).invoke(prompt(message, []))
    assert reply.tool_calls[0]["args"] == {"order_id": order, "amount": amount}


def test_usage_metadata_counts_words() -> None:
    messages = prompt("How do refunds work?", PASSAGES)
    reply = OfflineSupportModel().invoke(messages)
    words = len("\n".join(str(m.content) for m in messages).split())
    assert reply.usage_metadata["input_tokens"] == words
    assert reply.usage_metadata["output_tokens"] == len(reply.content.split())


def test_usage_total_is_input_plus_output_with_tool_call() -> None:
    reply = OfflineSupportModel().bind_tools([issue_refund]).invoke(prompt(REFUND_MESSAGE, []))
    usage = reply.usage_metadata
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_build_model_defaults_to_offline() -> None:
    choice = build_model({})
    assert isinstance(choice.model, OfflineSupportModel)
    assert (choice.name, choice.provider) == (OFFLINE_MODEL_NAME, "offline")


def test_build_model_openai_compatible() -> None:
    choice = build_model({"RELAY_MODEL_BASE_URL": "http://127.0.0.1:9/v1", "RELAY_MODEL": "llama3"})
    assert (choice.name, choice.provider) == ("llama3", "openai")
    assert not isinstance(choice.model, OfflineSupportModel)
