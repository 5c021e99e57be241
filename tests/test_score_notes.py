"""Where a score is missing or says little, the tables and pages say why: nAOPC's "-" (a long text, bounds that
meet) and a near-even prediction (comprehensiveness can be negative there)."""

from __future__ import annotations

import math

import numpy as np

from transformer_attention.analysis.agreement import BOUNDS_MAX_WORDS
from transformer_attention.analysis.faithfulness import Explained
from transformer_attention.analysis.pages import page_words
from transformer_attention.analysis.report import Faithfulness


def report(naopc_texts: int | None, near_even: int) -> Faithfulness:
    scores = {"aopc": 0.2, "comprehensiveness": -0.01, "sufficiency": 0.0, "naopc": 0.5}
    scores |= {f"{q}@50": v for q, v in scores.items() if q in ("comprehensiveness", "sufficiency")}
    found = Faithfulness("test", 5, "mask", [50.0], 0.0, scores={"decompx": scores}, sem={"decompx": {}})
    found.naopc_texts, found.near_even = naopc_texts, near_even
    return found


def test_the_tables_say_why_nAOPC_is_short_and_how_many_texts_are_near_even():
    notes = report(3, 2).notes()
    assert notes[0].startswith("nAOPC: over the 3 of 5 texts with its bounds") and str(BOUNDS_MAX_WORDS) in notes[0]
    assert notes[1].startswith("2 of 5 texts are near even (p < 0.6") and "negative" in notes[1]
    assert report(0, 0).notes()[0].startswith("no nAOPC: ")
    assert report(5, 0).notes() == [] and report(None, 0).notes() == []  # every text counted, or not known
    table = report(3, 2).table()
    assert table[-2:] == [f"- {n}" for n in notes] and all(n in report(3, 2).summary() for n in notes)


def explained(words: int, naopc: float) -> Explained:
    scores = {"comprehensiveness": -0.02, "sufficiency": 0.01, "aopc": 0.0, "naopc": naopc, "sufficiency@20": 0.0}
    return Explained(0, 0.51, {"decompx": np.zeros(words + 1)}, {"decompx": scores}, target=0)


def test_a_page_says_why_its_nAOPC_is_missing_and_what_a_near_even_prediction_means():
    even, clear = {"negative": 0.51, "positive": 0.49}, {"negative": 0.9, "positive": 0.1}
    long = page_words(even, explained(BOUNDS_MAX_WORDS + 1, math.nan), "replaced by [MASK]", None)
    note = long["faithfulness_note"]
    assert note.startswith("for the class negative;") and "near even" in note and "p(negative) = 0.51" in note
    assert f"this text has {BOUNDS_MAX_WORDS + 1} words" in note and "nAOPC" in note
    short = page_words(clear, explained(5, math.nan), "deleted", None)["faithfulness_note"]
    assert "near even" not in short and "lowest and highest AOPC meet" in short
    assert "nAOPC" not in page_words(clear, explained(5, 0.4), "deleted", None)["faithfulness_note"]
