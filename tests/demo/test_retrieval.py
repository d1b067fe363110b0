"""span_relay_demo.retrieval: the BM25 knowledge base over span_relay_demo/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from span_relay_demo.retrieval import CORPUS_DIR, KnowledgeBase, Passage, stem, tokens


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase()


def test_corpus_is_loaded_without_readme(kb: KnowledgeBase) -> None:
    expected = sorted(p.stem for p in CORPUS_DIR.glob("*.md") if p.name.lower() != "readme.md")
    assert [doc_id for doc_id, _, _ in kb.docs] == expected
    assert len(kb) == len(expected) > 10


def test_refund_question_ranks_refund_policy_first(kb: KnowledgeBase) -> None:
    passages = kb.search("How do refunds work?")
    assert passages[0].doc_id == "refund-policy"
    assert passages[0].title.startswith("Refund Policy")
    assert "refund" in passages[0].text.lower()
    assert 1 <= len(passages) <= 3
    scores = [p.score for p in passages]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert all(isinstance(p, Passage) for p in passages)


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("How do I reset my password?", "password-reset"),
        ("My parcel is lost", "lost-parcels"),
        ("Can I pay with a gift card?", "gift-cards"),
    ],
)
def test_topical_queries(kb: KnowledgeBase, query: str, doc_id: str) -> None:
    assert doc_id in [p.doc_id for p in kb.search(query)]


@pytest.mark.parametrize("query", ["", "   ", "?!", "how do you", "the and of"])
def test_empty_or_stopword_query_finds_nothing(kb: KnowledgeBase, query: str) -> None:
    assert kb.search(query) == []


def test_unknown_words_find_nothing(kb: KnowledgeBase) -> None:
    assert kb.search("xylophone quasar") == []


def test_search_is_deterministic_and_k_bounded(kb: KnowledgeBase) -> None:
    assert kb.search("refund shipping return", k=5) == kb.search("refund shipping return", k=5)
    assert len(kb.search("refund shipping return", k=5)) <= 5
    assert len(kb.search("refund", k=100)) <= len(kb)


def test_stem_and_tokens() -> None:
    assert stem("refunds") == "refund"
    assert stem("deliveries") == "delivery"
    assert stem("shipping") == "shipp"
    assert stem("address") == "address"  # -ss is kept
    assert stem("is") == "is"  # too short to strip
    assert tokens("How do Refunds WORK?") == ["refund"]


def test_empty_corpus_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# not a document\n")
    with pytest.raises(RuntimeError, match="no documents"):
        KnowledgeBase(tmp_path)


def test_custom_corpus(tmp_path: Path) -> None:
    (tmp_path / "alpha.md").write_text("# Alpha title\nBananas are yellow.\n")
    (tmp_path / "beta.md").write_text("# Beta\nCherries are red.\n")
    kb = KnowledgeBase(tmp_path)
    [hit] = kb.search("bananas")
    assert (hit.doc_id, hit.title, hit.text) == ("alpha", "Alpha title", "Bananas are yellow.")
