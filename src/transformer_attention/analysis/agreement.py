"""What the ERASER scores (faithfulness.py) leave open, per text:

- agreement: each method's Kendall tau (tau-b, as scipy's `kendalltau`) with leave-one-out's and with Integrated
  Gradients' scores over the text's words, [CLS] left out: 1 for the same ranking, NaN for a text whose scores
  are all equal;
- normalized AOPC (Edin et al. 2024, "Normalized AOPC: Fixing Misleading Faithfulness Metrics for Feature
  Attribution Explainability"): (AOPC - lower) / (upper - lower), the bounds the AOPC of the best and of the worst
  removal order of that text found, by a greedy search one word at a time (a beam of one) or by any method's
  order (faithfulness.py), so that models and texts whose probabilities move by different amounts compare: in
  [0, 1]. Texts of more than BOUNDS_MAX_WORDS words get NaN (the search costs n (n + 1) passes).

Shapes: N texts, T tokens, C classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import kendalltau
from torch import nn

from ..inference import probabilities
from .passes import Passes
from .removal import without

REFERENCES = ("leave_one_out", "integrated_gradients")  # what every method's ranking is compared with
BOUNDS_MAX_WORDS = 64  # longer texts get no normalized AOPC: their greedy bounds cost n (n + 1) passes each


def agreement(attributions: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per method of one text's `attributions`, its Kendall tau with each of REFERENCES there is (`tau_<name>`)."""
    out: dict[str, dict[str, float]] = {}
    for method, scores in attributions.items():
        out[method] = {}
        for ref in REFERENCES:
            if ref in attributions:
                words, other = np.asarray(scores[1:], np.float64), np.asarray(attributions[ref][1:], np.float64)
                tau = kendall_tau_b(words, other) if len(words) > 1 else math.nan
                out[method][f"tau_{ref}"] = float(tau)
    return out


def agreement_over_texts(scores: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and reference (`tau_<name>`), over several texts' scores (`Explained.scores`): the mean and
    standard error of tau, the texts counted (a text with no tau counts for none) and whether every one ranks the
    words as the reference does (tau 1, up to rounding: "identical")."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for method in scores[0] if scores else {}:
        for key in (f"tau_{ref}" for ref in REFERENCES):
            v = np.array([s[method].get(key, math.nan) for s in scores], dtype=np.float64)
            v = v[~np.isnan(v)]
            if len(v):
                sem = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
                identical = bool(np.all(v > 1 - 1e-9))
                found = {"mean": float(v.mean()), "sem": sem, "texts": len(v), "identical": identical}
                out.setdefault(method, {})[key] = found
    return out


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two (n,) score vectors (scipy's `kendalltau`): (concordant - discordant pairs) /
    sqrt(pairs untied in x * pairs untied in y); NaN, without scipy's warning, when either is constant."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(kendalltau(x, y).statistic)


def curve_aopc(
    p_full: float, p_removed: Sequence[float], n: int, curve: Sequence[int], count: Callable[[float, int], int]
) -> float:
    """AOPC from the probabilities after 0..n words removed in some order: the mean drop at each curve point."""
    return float(np.mean([p_full - p_removed[count(j, n)] for j in curve]))


def aopc_bounds(
    net: nn.Module,
    rows: Sequence[Sequence[int]],
    targets: Sequence[int],
    full: Sequence[float],
    *,
    mask_id: int | None,
    curve: Sequence[int],
    count: Callable[[float, int], int],
    batch_size: int = 256,
) -> list[tuple[float, float]]:
    """(lower, upper) AOPC of each row for its target class, the removal orders searched greedily: at each step
    the word whose removal lowers p(target) the least (lower) or the most (upper). `full`: p(target | row);
    `count(j, n)`: how many of n words the curve point j% removes. NaN for rows over BOUNDS_MAX_WORDS words."""
    # (row index, upper?, removed positions, probabilities after each removal)
    searches: list[tuple[int, bool, list[int], list[float]]] = []
    for i, row in enumerate(rows):
        if len(row) - 1 <= BOUNDS_MAX_WORDS:
            searches += [(i, up, [], [float(full[i])]) for up in (False, True)]
    while True:
        live = [s for s in searches if len(s[2]) < len(rows[s[0]]) - 1]
        if not live:
            break
        variants, owners = [], []
        for s in live:
            i, _, removed, _ = s
            for pos in range(1, len(rows[i])):
                if pos not in removed:
                    variants.append(without(rows[i], {*removed, pos}, mask_id))
                    owners.append((s, pos))
        probs = probabilities(net, variants, batch_size=batch_size)  # (V, C)
        best: dict[int, tuple[float, int, float]] = {}
        for (s, pos), p in zip(owners, probs, strict=True):
            value = float(p[int(targets[s[0]])])
            key = -value if s[1] else value  # upper: the lowest probability left; lower: the highest
            if id(s) not in best or key > best[id(s)][0]:
                best[id(s)] = (key, pos, value)
        for s in live:
            _, pos, value = best[id(s)]
            s[2].append(pos)
            s[3].append(value)
    bounds = {
        (i, up): curve_aopc(float(full[i]), after, len(rows[i]) - 1, curve, count) for i, up, _, after in searches
    }
    return [(bounds.get((i, False), math.nan), bounds.get((i, True), math.nan)) for i in range(len(rows))]


def bounds_passes(rows: Sequence[Sequence[int]]) -> Passes:
    """The model work of `aopc_bounds`: per row of n <= BOUNDS_MAX_WORDS words, n + (n - 1) + ... + 1 variants for
    each bound."""
    return Passes(forward=sum(n * (n + 1) for n in (len(r) - 1 for r in rows) if n <= BOUNDS_MAX_WORDS))


def normalized(aopc: float, lower: float, upper: float) -> float:
    """(aopc - lower) / (upper - lower); NaN without bounds or when they meet (no word moves the probability)."""
    span = upper - lower
    return (aopc - lower) / span if span > 1e-9 else math.nan
