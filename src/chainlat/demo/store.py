"""The demo's local data: an FAQ searched with SQLite's FTS5, and an orders table."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Store:
    """The demo's local data: an FTS5 index of the FAQ and an orders table, in SQLite."""

    db: sqlite3.Connection
    questions: list[str]


def open_store() -> Store:
    """Load the shipped corpus into an in-memory SQLite database."""
    corpus = json.loads(resources.files("chainlat").joinpath("data/demo_corpus.json").read_text())
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE VIRTUAL TABLE faq USING fts5(title, body)")
    db.executemany(
        "INSERT INTO faq VALUES (?, ?)", [(d["title"], d["body"]) for d in corpus["faq"]]
    )
    db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT, eta_days INTEGER)")
    db.executemany(
        "INSERT INTO orders VALUES (?, ?, ?)",
        [(o["order"], o["status"], o["eta_days"]) for o in corpus["orders"]],
    )
    db.commit()
    return Store(db, list(corpus["questions"]))


def search(db: sqlite3.Connection, question: str, k: int = 3) -> list[str]:
    """The ``k`` FAQ entries that match the question best (BM25)."""
    words = re.findall(r"[a-z0-9]+", question.lower())
    query = " OR ".join(f'"{w}"' for w in words if len(w) > 2) or '""'
    rows = db.execute(
        "SELECT title, body FROM faq WHERE faq MATCH ? ORDER BY bm25(faq) LIMIT ?", (query, k)
    ).fetchall()
    return [f"{title}: {body}" for title, body in rows]


def lookup_order(db: sqlite3.Connection, question: str) -> str:
    """The status line of the order named in the question, if any."""
    found = re.search(r"\bA-\d{4}\b", question)
    if found is None:
        return "no order number given"
    row = db.execute("SELECT status, eta_days FROM orders WHERE id = ?", (found[0],)).fetchone()
    if row is None:
        return f"order {found[0]} not found"
    return f"order {found[0]} is {row[0]}, eta {row[1]} days"
