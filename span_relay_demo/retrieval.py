"""BM25 retrieval over the shop's knowledge base (``span_relay_demo/corpus/*.md``), with bm25s."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).parent / "corpus"
_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i if in is it its me my "
    "of on or our please so that the their them then there these this to was what when "
    "where which who why will with work works you your".split()
)


@dataclass(frozen=True, slots=True)
class Passage:
    doc_id: str
    title: str
    text: str
    score: float


def stem(word: str) -> str:
    """A light English stemmer: enough that 'refunds' finds 'refund'."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + keep
    return word


def tokens(text: str) -> list[str]:
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class KnowledgeBase:
    """The documents and their BM25 index, built once at start-up."""

    def __init__(self, corpus_dir: Path = CORPUS_DIR) -> None:
        self.docs: list[tuple[str, str, str]] = []  # (doc_id, title, body)
        for path in sorted(corpus_dir.glob("*.md")):
            if path.name.lower() == "readme.md":
                continue
            lines = path.read_text(encoding="utf-8").strip().splitlines()
            title = lines[0].lstrip("# ").strip()
            body = "\n".join(lines[1:]).strip()
            self.docs.append((path.stem, title, body))
        if not self.docs:
            raise RuntimeError(f"no documents in {corpus_dir}")
        import bm25s  # the 'demo' extra (pip install 'span-relay[demo]')

        # bm25s sets its own logger to DEBUG when imported; it talks only at WARNING here
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._index = bm25s.BM25()
        self._index.index([tokens(f"{t} {b}") for _, t, b in self.docs], show_progress=False)

    def __len__(self) -> int:
        return len(self.docs)

    def search(self, query: str, k: int = 3) -> list[Passage]:
        query_tokens = tokens(query)
        if not query_tokens:
            return []
        ids, scores = self._index.retrieve(
            [query_tokens], k=min(k, len(self.docs)), show_progress=False
        )
        passages = []
        for i, score in zip(ids[0], scores[0], strict=True):
            if score <= 0:
                continue
            doc_id, title, body = self.docs[int(i)]
            passages.append(Passage(doc_id, title, body, round(float(score), 4)))
        return passages
