"""Faithfulness, the report of faithfulness.py: each method's scores averaged over the texts, as JSON, a markdown
table and console lines."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .agreement import BOUNDS_MAX_WORDS
from .removal import REMOVAL_PHRASES

CURVE = tuple(range(0, 101, 10))  # the deletion curve: % of a text's words removed
NEAR_EVEN = 0.2  # a class that leads the next by less (p < 0.6 of two) is near even: its scores say little
PLAUSIBILITY = {  # plausibility.py's measures the tables show (average precision: the JSON only), by header
    "auprc": "AUPRC",
    "token_f1": "token F1",
    "eraser_comprehensiveness": "ERASER compr.",
    "eraser_sufficiency": "ERASER suff.",
}


@dataclass
class Faithfulness:
    """Each method's ERASER scores, averaged over the texts (`scores`) with their standard errors (`sem`)."""

    split: str
    texts: int
    removal: str  # "mask" or "delete"
    k: list[float]
    ig_error: float  # Integrated Gradients' mean relative completeness error
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # method -> measure -> mean
    sem: dict[str, dict[str, float]] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)  # method -> mean drop at each CURVE point
    examples: list[dict[str, Any]] = field(default_factory=list)
    plausible: int = 0  # texts whose deciding words are known (toy set, rationales), scored for plausibility
    naopc_texts: int | None = None  # texts with nAOPC's bounds (None: not counted)
    near_even: int = 0  # texts whose class explained has p < (1 + NEAR_EVEN) / 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "texts": self.texts,
            "removal": self.removal,
            "removal_means": REMOVAL_PHRASES[self.removal],
            "k": self.k,
            "curve_percent": list(CURVE),
            "integrated_gradients_completeness_error": self.ig_error,
            "scores": self.scores,
            "sem": self.sem,
            "deletion_curves": self.curves,
            "plausibility_texts": self.plausible,
            "naopc_texts": self.naopc_texts,
            "near_even_texts": self.near_even,
            "examples": self.examples,
        }

    def table(self) -> list[str]:
        """The summary as a markdown table: one row per method, best AOPC first; agreement as mean +- standard error,
        "= (identical)" when the rankings are the same on every text."""
        extra = {"naopc": "nAOPC", "tau_leave_one_out": "tau LOO", "tau_integrated_gradients": "tau IG", **PLAUSIBILITY}
        shown = [m for m in extra if self._measured(m)]  # nAOPC, when its bounds were searched
        head = ["method", *(f"compr. {k:g}%" for k in self.k), "compr.", *(f"suff. {k:g}%" for k in self.k), "suff."]
        head += ["AOPC", *(extra[m] for m in shown), "s / text"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for method in sorted(self.scores, key=lambda m: -self.scores[m]["aopc"]):
            s, e = self.scores[method], self.sem[method]
            cells = [s[f"comprehensiveness@{k:g}"] for k in self.k] + [s["comprehensiveness"]]
            cells += [s[f"sufficiency@{k:g}"] for k in self.k] + [s["sufficiency"], s["aopc"]]
            text = [f"{v:.3f}" for v in cells] + [_cell(s.get(m), e.get(m), tau=m.startswith("tau")) for m in shown]
            text.append(_seconds(s.get("seconds_per_text")))
            lines.append(f"| {method} | " + " | ".join(text) + " |")
        return lines + ([""] + [f"- {note}" for note in self.notes()] if self.notes() else [])

    def notes(self) -> list[str]:
        """What the tables' numbers cannot say: why nAOPC is missing where it is, and how many texts the model is
        near even on (removing words can raise p there: a negative comprehensiveness says little of a method)."""
        notes, n = [], self.naopc_texts
        if n is not None and n < self.texts:
            why = (
                f"a text over {BOUNDS_MAX_WORDS} words has none (their search costs n(n + 1) passes), nor one "
                "where no removal moves p"
            )
            notes.append(
                f"nAOPC: over the {n} of {self.texts} texts with its bounds ({why})" if n else f"no nAOPC: {why}"
            )
        if self.near_even:
            p = (1 + NEAR_EVEN) / 2
            notes.append(
                f"{self.near_even} of {self.texts} texts are near even (p < {p:.1f} for the class explained): "
                "removing words can raise p there, so comprehensiveness can be negative; their scores say little of "
                "a method"
            )
        return notes

    def summary(self) -> list[str]:
        """A few aligned lines for the console: comprehensiveness, sufficiency, AOPC, nAOPC and plausibility (AUPRC,
        token F1, ERASER's comprehensiveness and sufficiency per word) per method, the last ones where measured."""
        ks, measures = ", ".join(f"{k:g}" for k in self.k), ["comprehensiveness", "sufficiency", "aopc"]
        measures += [m for m in ("naopc", *PLAUSIBILITY) if self._measured(m)]
        short = {"comprehensiveness": "compr.", "sufficiency": "suff.", "aopc": "AOPC", "naopc": "nAOPC"}
        short |= {"auprc": "AUPRC", "token_f1": "tok F1", "eraser_comprehensiveness": "E.compr"}
        short |= {"eraser_sufficiency": "E.suff"}
        names = "".join(f"{short[m]:>8}" for m in measures)
        lines = [f"{'method':<24}{names}{'s/text':>9}   (compr., suff.: mean over k = {ks}%)"]
        for method in sorted(self.scores, key=lambda m: -self.scores[m]["aopc"]):
            cells = "".join(f"{self.scores[method][m]:>8.3f}" for m in measures)
            lines.append(f"{method:<24}{cells}{_seconds(self.scores[method].get('seconds_per_text')):>9}")
        return lines + self.notes()

    def _measured(self, measure: str) -> bool:
        """Whether any method has a value of `measure` (nAOPC has none when its bounds were not searched)."""
        return any(not math.isnan(s.get(measure, math.nan)) for s in self.scores.values())


def _cell(mean: float | None, sem: float | None, tau: bool) -> str:
    """A mean with its standard error; a `tau` of "1 (identical)" when every text ranks the words the same; "-" for
    none."""
    if mean is None or math.isnan(mean):
        return "-"
    if tau and mean > 1 - 1e-9 and (sem or 0.0) < 1e-9:  # every text's tau 1, up to rounding
        return "1 (identical)"
    return f"{mean:.3f} ± {sem or 0.0:.3f}"


def _seconds(value: float | None) -> str:
    """Seconds per text, to three significant digits; "-" when not measured."""
    return "-" if value is None or math.isnan(value) else f"{value:.3g}"
