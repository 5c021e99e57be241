"""Why DecompX finds the words people marked less often than attention does (AUPRC against the movie reviews'
rationales), with the project's own plausibility code (analysis/plausibility.py: words, AUPRC, token F1) and its
DecompX (analysis/methods/decompx.py), on one checkpoint and one split:

    OMP_NUM_THREADS=1 python benchmarks/plausibility_gap.py <run>/checkpoints/last.ckpt \\
        [--data ../shared/data/movie_rationales] [--split test] [--texts 60] \\
        [--json benchmarks/results/plausibility_gap.json]

Every review is read as evaluate.py reads it (the checkpoint's tokenizer and trained length) and explained for the
class the model predicts. It measures, each averaged over the reviews (mean ± standard error):

- the sign: DecompX's AUPRC with its signed scores (the table's), their sizes |s|, their part towards the
  predicted class max(s, 0), and its scores towards the review's true label (what the people marked is evidence
  for); AUPRC on the reviews the model gets right and wrong apart;
- the n-gram shares: DecompX's own word vectors only, n-gram vectors shared equally among their words (the
  registered method), or given whole to the word they end at (each with the naive-Bayes term's word shares, where
  the model has that term); and with the term, the encoder's part alone and the term's alone;
- the pieces: a word's pieces summed instead of averaged, and AUPRC over the words the tokenizer keeps whole;
- spans: people mark phrases, so each word's score averaged with its neighbours' (5 words) for both methods, and
  how alike neighbouring words' ranks are (their correlation);
- the top of each ranking: the share of each method's top 5% and 10% words that people marked;
- which marked words DecompX ranks low: the share of marked and unmarked words (content words, stopwords,
  punctuation) it scores against the predicted class, the share of marked words in the bottom half of each
  method's ranking, and the marked content words it ranks in the bottom half most often.
"""

from __future__ import annotations

import argparse
import math
import string
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from common import RESULTS, ROOT, machine, write_json
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from transformer_attention.analysis.attributions import attribute
from transformer_attention.analysis.methods.decompx import decompx, shared_by_words, word_shares
from transformer_attention.analysis.plausibility import text_scores, word_rationale, word_scores
from transformer_attention.data.rationales import rationale_flags
from transformer_attention.data.tokenizer import encode, load_tokenizer
from transformer_attention.inference import probabilities, trained_length
from transformer_attention.plotting.words import word_values
from transformer_attention.training.checkpoint import load_module

TOP = (5, 10)  # % of a text's words: the share of them marked, for each method's top words
WINDOW = 5  # words averaged for the span view (the word and two either side)
FREQUENT = 15  # marked words listed
KINDS = ("content", "stopword", "punctuation")
CLITICS = frozenset({"s", "t", "n't", "ve", "re", "ll", "d", "m"})  # the reviews' split-off endings: stopwords too


def smoothed(values: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """(W,) each word's value averaged with its neighbours' (window words, fewer at the ends)."""
    kernel = np.ones(window)
    return np.convolve(values, kernel, "same") / np.convolve(np.ones_like(values), kernel, "same")


def percentiles(values: np.ndarray) -> np.ndarray:
    """(W,) each word's place in its text's ranking: 0 the lowest score, 1 the highest (ties: earlier lower)."""
    order = np.argsort(values, kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(len(values)) / max(1, len(values) - 1)
    return out


def kind_of(word: str) -> str:
    """'punctuation', 'stopword' or 'content' for one whitespace word."""
    bare = word.strip(string.punctuation).lower()
    return "punctuation" if not bare else "stopword" if bare in ENGLISH_STOP_WORDS | CLITICS else "content"


def mean_sem(values: list[float]) -> list[float]:
    v = np.array([x for x in values if not math.isnan(x)])
    if len(v) == 0:
        return [math.nan, math.nan, 0]
    return [float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0, len(v)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "movie_rationales")
    parser.add_argument("--split", default="test")
    parser.add_argument("--texts", type=int, default=None, help="the first N reviews (default: all)")
    parser.add_argument("--json", type=Path, default=RESULTS / "plausibility_gap.json")
    args = parser.parse_args()
    start = time.perf_counter()
    module = load_module(str(args.ckpt))
    net = module.net.eval()
    tok = load_tokenizer(module.tokenizer_json)
    length = trained_length(module)
    table = pd.read_parquet(args.data / f"{args.split}.parquet")[: args.texts]
    texts = [str(t) for t in table["text"]]
    rows = encode(tok, texts, length)
    where = f"{args.data / args.split}.parquet"
    pairs = enumerate(zip(table["rationale"], texts, strict=True))
    flags = [rationale_flags(v, t, f"{where}, row {i}") for i, (v, t) in pairs]
    labels = [int(y) for y in table["label"]]
    predicted = [int(p.argmax()) for p in probabilities(net, rows, batch_size=8)]
    found, _ = attribute(net, rows, predicted, mask_id=None, methods=["attention", "decompx", "random"])

    measures: dict[str, dict[str, list[float]]] = {}  # variant -> measure -> per text

    def add(variant: str, scores: np.ndarray, truth: np.ndarray) -> None:
        for measure, value in (text_scores(scores, truth) or {}).items():
            if measure != "average_precision":
                measures.setdefault(variant, {}).setdefault(measure, []).append(value)

    marked_kinds: Counter[str] = Counter()
    unmarked_kinds: Counter[str] = Counter()
    low: dict[str, Counter[tuple[str, str]]] = {"attention": Counter(), "decompx": Counter()}  # (word, kind) low
    marked_words: Counter[str] = Counter()
    low_words: dict[str, Counter[str]] = {"attention": Counter(), "decompx": Counter()}
    negative: Counter[tuple[str, str, bool]] = Counter()  # (marked?, kind, scored against the predicted class)
    gaps: dict[str, list[float]] = {"right": [], "wrong": []}  # decompx - attention AUPRC, by prediction
    neighbours: dict[str, list[float]] = {"attention": [], "decompx": [], "random": []}
    scored = 0
    for i, (text, row) in enumerate(zip(texts, rows, strict=True)):
        rationale = word_rationale(text, flags[i], tok, len(row))
        if rationale is None or not 0 < rationale.flags.sum() < len(rationale.flags):
            continue
        scored += 1
        truth = rationale.flags
        ids = torch.as_tensor(np.asarray(row, dtype=np.int64))[None]
        parts = decompx(net, ids, torch.ones_like(ids, dtype=torch.bool))
        shared = word_shares(parts)[0].numpy()  # (T, C)
        assert np.allclose(shared[:, predicted[i]], found[i]["decompx"], atol=1e-9), "not the registered decompx"
        evidence = list(enumerate(parts.evidence_by_n, start=1))  # the naive-Bayes term's, if the model has one
        term = shared_by_words(torch.zeros_like(parts.tokens), evidence)[0].numpy()  # (T, C): its shares by word
        own, at_end = parts.tokens[0].numpy() + term, (parts.tokens + parts.ngrams)[0].numpy() + term
        words = {m: word_scores(found[i][m], rationale) for m in ("attention", "decompx", "random")}
        dx = words["decompx"]
        right = "right" if predicted[i] == labels[i] else "wrong"
        for m in ("attention", "decompx", "random"):
            add(m, words[m], truth)
            add(f"{m} ({right} predictions)", words[m], truth)
            ranks = percentiles(words[m])
            neighbours[m].append(float(np.corrcoef(ranks[:-1], ranks[1:])[0, 1]))
            for q in TOP:
                k = max(1, q * len(truth) // 100)
                measures.setdefault(m, {}).setdefault(f"marked_in_top_{q}%", []).append(
                    float(truth[np.argsort(-words[m], kind="stable")[:k]].mean())
                )
        gaps[right].append(measures["decompx"]["auprc"][-1] - measures["attention"]["auprc"][-1])
        add("decompx |s|", np.abs(dx), truth)
        add("decompx max(s, 0)", np.maximum(dx, 0), truth)
        add("decompx towards the true label", word_scores(shared[:, labels[i]], rationale), truth)
        add("decompx own word vectors only", word_scores(own[:, predicted[i]], rationale), truth)
        add("decompx n-grams to their last word", word_scores(at_end[:, predicted[i]], rationale), truth)
        if evidence:
            add(
                "decompx encoder only (no naive-Bayes term)",
                word_scores((shared - term)[:, predicted[i]], rationale),
                truth,
            )
            add("naive-Bayes term alone", word_scores(term[:, predicted[i]], rationale), truth)
        whole = np.array([len(w.tokens) == 1 for w in rationale.words[1:]])
        for m in ("attention", "decompx"):
            summed = word_values(found[i][m], rationale.words, combine="sum")[1:]
            add(f"{m} pieces summed", summed, truth)
            add(f"{m} whole words only", words[m][whole], truth[whole])
            add(f"{m} span-smoothed ({WINDOW} words)", smoothed(words[m]), truth)
        content = np.array([kind_of(w.text) == "content" for w in rationale.words[1:]])
        for m in ("attention", "decompx"):
            add(f"{m} content words only", words[m][content], truth[content])
        for j, w in enumerate(rationale.words[1:]):
            which = "marked" if truth[j] else "unmarked"
            negative[(which, kind_of(w.text), bool(dx[j] < 0))] += 1
            (marked_kinds if truth[j] else unmarked_kinds)[kind_of(w.text)] += 1
        place = {m: percentiles(words[m]) for m in ("attention", "decompx")}
        for j in np.flatnonzero(truth):
            w = rationale.words[j + 1].text
            bare, kind = w.strip(string.punctuation).lower() or w, kind_of(w)
            marked_words[bare] += 1
            for m in ("attention", "decompx"):
                if place[m][j] < 0.5:
                    low[m][(kind, "low")] += 1
                    low_words[m][bare] += 1
                low[m][(kind, "all")] += 1
        if (i + 1) % 20 == 0:
            print(f"{i + 1}/{len(texts)} reviews, {time.perf_counter() - start:.0f} s", file=sys.stderr)

    figures = {v: {m: mean_sem(x) for m, x in ms.items()} for v, ms in measures.items()}
    gap = [d - a for d, a in zip(measures["decompx"]["auprc"], measures["attention"]["auprc"], strict=True)]
    bottom_half = {
        m: {k: low[m][(k, "low")] / max(1, low[m][(k, "all")]) for k in KINDS}
        | {"all": sum(low[m][(k, "low")] for k in KINDS) / max(1, sum(low[m][(k, "all")] for k in KINDS))}
        for m in low
    }
    frequent = [
        {
            "word": w,
            "marked": n,
            "bottom_half_decompx": low_words["decompx"][w] / n,
            "bottom_half_attention": low_words["attention"][w] / n,
        }
        for w, n in marked_words.most_common(FREQUENT)
    ]
    sunk = [
        {
            "word": w,
            "marked": marked_words[w],
            "bottom_half_decompx": n / marked_words[w],
            "bottom_half_attention": low_words["attention"][w] / marked_words[w],
        }
        for w, n in [(w, n) for w, n in low_words["decompx"].most_common() if kind_of(w) == "content"][:FREQUENT]
    ]
    payload = {
        "what": "Why DecompX ranks below attention by AUPRC against human rationales: AUPRC and token F1 of "
        "variants of each method's word scores (mean, standard error, texts), and which marked words each ranks "
        "in the bottom half of its text; the project's plausibility code, each review explained for the class the "
        "model predicts, read at the checkpoint's trained length",
        "command": "OMP_NUM_THREADS=1 python benchmarks/plausibility_gap.py " + " ".join(sys.argv[1:]),
        "checkpoint": str(args.ckpt),
        "data": f"{args.data.name}/{args.split}",
        "tokens": length,
        "texts": len(texts),
        "plausibility_texts": scored,
        "accuracy": float(np.mean([p == y for p, y in zip(predicted, labels, strict=True)])),
        "machine": machine(),
        "seconds": round(time.perf_counter() - start, 1),
        "figures": figures,
        "decompx_minus_attention_auprc": mean_sem(gap),
        "decompx_minus_attention_auprc_by_prediction": {k: mean_sem(v) for k, v in gaps.items()},
        "neighbouring_words_rank_correlation": {k: mean_sem(v) for k, v in neighbours.items()},
        "share_scored_against_predicted_class_by_decompx": {
            f"{which} {kind}": negative[(which, kind, True)]
            / max(1, negative[(which, kind, True)] + negative[(which, kind, False)])
            for which in ("marked", "unmarked")
            for kind in KINDS
        },
        "kinds_of_words": {
            "marked": {k: marked_kinds[k] / max(1, sum(marked_kinds.values())) for k in KINDS},
            "unmarked": {k: unmarked_kinds[k] / max(1, sum(unmarked_kinds.values())) for k in KINDS},
        },
        "marked_in_bottom_half": bottom_half,
        "frequent_marked_words": frequent,
        "marked_content_words_decompx_ranks_low_most_often": sunk,
    }
    write_json(args.json, payload)
    for variant, ms in figures.items():
        auprc, f1 = ms["auprc"], ms["token_f1"]
        print(f"{variant:45s} AUPRC {auprc[0]:.3f} ± {auprc[1]:.3f}  token F1 {f1[0]:.3f}")


if __name__ == "__main__":
    main()
