"""Linear baselines on the same splits as the transformer: TF-IDF + logistic regression, and NBSVM.

    python benchmarks/baselines.py [--data-root ../shared/data] [--json benchmarks/results/baselines.json]
        [--runs rotten_tomatoes=outputs/train/multiruns/<time> imdb=outputs/train/runs/<time> ...]
        (name a recipe: rotten_tomatoes/pretrained=<folder>; several per dataset are printed in turn)

Prints a table (dataset, features, validation and test accuracy, fit seconds) and writes JSON; with
`--runs`, the transformer runs under each folder (their `test/acc`, from metrics.csv) are printed beside.
Every setting (C; NBSVM's beta too) is picked on the validation split (carved from train with the
same seed and fraction as the data module when the dataset has none), never on test.

NBSVM (Wang & Manning 2012, "Baselines and Bigrams"; with trigrams as Mesnil et al. 2015 rerun it): binarized
n-grams of lowercased words and punctuation marks, scaled by the naive-Bayes log-count ratio of the train
split, a liblinear L2-regularised L2-loss SVM on them, and its weights interpolated towards their mean
magnitude, w' = (1 - beta) * mean|w| + beta * w.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

ROOT = Path(__file__).resolve().parents[1]
TOKENS = r"[\w']+|[^\w\s]"  # NBSVM's tokens: words with their apostrophes (don't, isn't), each punctuation mark
NBSVM_C = (0.01, 0.03, 0.1, 0.3, 1.0)
NBSVM_BETA = (0.0, 0.25, 0.5, 0.75, 1.0)  # 1: the SVM's own weights; Wang & Manning used 0.25 (and C = 1)


def load_splits(folder: Path, val_fraction: float = 0.1, seed: int = 42) -> dict[str, pd.DataFrame]:
    """The splits exactly as the data module builds them: its validation carve (when the data has none) and
    its removal of train rows that share text with validation, so both models see the same rows."""
    from transformer_attention.data.datamodule import ReviewDataModule

    raw = ReviewDataModule(name="local", path=str(folder), val_fraction=val_fraction, split_seed=seed).load()
    return {split: pd.DataFrame(cols) for split, cols in raw.items()}


def clean(texts: pd.Series) -> list[str]:
    return texts.str.replace(r"<br\s*/?>", " ", regex=True).tolist()


def tfidf(name: str, splits: dict[str, pd.DataFrame], ngram: int) -> dict:
    start = time.perf_counter()
    vec = TfidfVectorizer(ngram_range=(1, ngram), min_df=2, max_df=0.9, sublinear_tf=True, lowercase=True)
    x_train = vec.fit_transform(clean(splits["train"]["text"]))
    x_val, x_test = (vec.transform(clean(splits[s]["text"])) for s in ("validation", "test"))
    y_train, y_val, y_test = (splits[s]["label"].to_numpy() for s in ("train", "validation", "test"))
    best = None
    for c in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0):
        clf = LogisticRegression(C=c, max_iter=2000).fit(x_train, y_train)
        val = float(np.mean(clf.predict(x_val) == y_val))
        if best is None or val > best[0]:
            best = (val, c, clf)
    val, c, clf = best
    test = float(np.mean(clf.predict(x_test) == y_test))
    return {
        "dataset": name,
        "features": f"tfidf 1-{ngram}gram",
        "C": c,
        "val_acc": round(val, 4),
        "test_acc": round(test, 4),
        "seconds": round(time.perf_counter() - start, 1),
        "train_rows": int(x_train.shape[0]),
    }


def binary_ngrams(ngram: int) -> CountVectorizer:
    return CountVectorizer(ngram_range=(1, ngram), binary=True, token_pattern=TOKENS, lowercase=True)


def nb_ratio(x: sparse.spmatrix, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """The log-count ratio r = log((p / |p|_1) / (q / |q|_1)) of each feature: p = alpha + its counts in the
    rows labelled 1, q = alpha + its counts in the rows labelled 0."""
    p, q = (alpha + np.asarray(x[y == label].sum(axis=0)).ravel() for label in (1, 0))
    return np.log(p / p.sum()) - np.log(q / q.sum())


def nbsvm(name: str, splits: dict[str, pd.DataFrame], ngram: int) -> dict:
    """NBSVM of 1- to `ngram`-grams: r from the train split; C and beta chosen on validation (the first best of
    the grid), test read once with them; `val_grid` keeps the validation accuracy of every pair."""
    start = time.perf_counter()
    vec = binary_ngrams(ngram)
    x_train = vec.fit_transform(clean(splits["train"]["text"]))
    y_train, y_val, y_test = (splits[s]["label"].to_numpy() for s in ("train", "validation", "test"))
    r = sparse.diags(nb_ratio(x_train, y_train))
    x_val, x_test = (vec.transform(clean(splits[s]["text"])) @ r for s in ("validation", "test"))
    x_train = x_train @ r
    grid: dict[str, dict[str, float]] = {}
    best = None
    for c in NBSVM_C:
        svm = LinearSVC(C=c, max_iter=10000, random_state=0).fit(x_train, y_train)  # liblinear shuffles
        w, b = svm.coef_.ravel(), svm.intercept_[0]
        for beta in NBSVM_BETA:
            w_beta = (1 - beta) * np.abs(w).mean() + beta * w
            val = float(np.mean((x_val @ w_beta + b > 0) == y_val))
            grid.setdefault(str(c), {})[str(beta)] = round(val, 4)
            if best is None or val > best[0]:
                best = (val, c, beta, w_beta, b)
    val, c, beta, w_beta, b = best
    test = float(np.mean((x_test @ w_beta + b > 0) == y_test))
    return {
        "dataset": name,
        "features": f"nbsvm 1-{ngram}gram",
        "C": c,
        "beta": beta,
        "val_acc": round(val, 4),
        "test_acc": round(test, 4),
        "seconds": round(time.perf_counter() - start, 1),
        "train_rows": int(x_train.shape[0]),
        "n_features": int(x_train.shape[1]),
        "val_grid": grid,
    }


def transformer_results(folder: Path) -> dict:
    """test/acc and val/acc_best of every run under `folder` (a run, or a multirun's job folders), from each
    run's metrics.csv; with runs of several draws of the pretraining (`pretrain.seed`), the mean of each draw,
    the spread over seeds within a draw (`std_seeds`, their mean) and the spread of the draws' means."""
    from transformer_attention.training.metrics import final_metrics

    accs, vals, starts, draws = [], [], set(), []
    for run in sorted({p.parents[2] for p in folder.glob("**/csv/version_*/metrics.csv")}):
        final = final_metrics(run)
        if "test/acc" in final:
            accs.append(final["test/acc"])
            vals.append(final["val/acc_best"])
            config = _config(run)
            starts.add(str(config.get("model", {}).get("init_from") or "scratch"))
            draws.append(config.get("pretrain", {}).get("seed"))
    row = {
        "runs": len(accs),
        "init_from": sorted(starts),
        "test_acc": accs,
        "val_acc_best": vals,
        "test_mean": float(np.mean(accs)) if accs else None,
        "test_std": float(np.std(accs)) if accs else None,
        "val_mean": float(np.mean(vals)) if vals else None,
    }
    if "pretrain" in starts and len(set(draws)) > 1:
        by_draw = {d: [a for a, e in zip(accs, draws, strict=True) if e == d] for d in sorted(set(draws))}
        row |= {
            "pretrain_seed": draws,
            "draw_means": {str(d): float(np.mean(a)) for d, a in by_draw.items()},
            "std_seeds": float(np.mean([np.std(a) for a in by_draw.values()])),
            "std_draws": float(np.std([np.mean(a) for a in by_draw.values()])),
        }
    return row


def _config(run: Path) -> dict:
    """The config the run ran with: its hparams.yaml (what it did: a recipe that fell back to random embeddings says
    `init_from: null` there), else what it was asked (.hydra/config.yaml)."""
    import yaml

    for config in (run / "hparams.yaml", run / ".hydra" / "config.yaml"):
        values = (yaml.safe_load(config.read_text()) or {}) if config.exists() else {}
        if "model" in values:
            return values
    return {}


def earlier_runs(path: Path, rows: list[dict], datasets: list[str]) -> list[dict]:
    """The rows of an earlier `path` that this call did not make again: every row of a dataset not in
    `datasets`, and the transformer rows whose runs were not read this time (a record is never dropped because
    its folder is gone, losers included; rows of no tested run are left out)."""
    if not path.exists():
        return []
    read = {(r["dataset"], r["folder"]) for r in rows if "folder" in r}
    old = json.loads(path.read_text())
    return [
        r
        for r in old
        if r["dataset"] not in datasets or ("folder" in r and r.get("runs") and (r["dataset"], r["folder"]) not in read)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--datasets", nargs="+", default=["rotten_tomatoes", "imdb"])
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "baselines.json")
    parser.add_argument("--runs", nargs="*", default=[], help="dataset=run-or-sweep-folder of transformer runs")
    args = parser.parse_args()
    runs: dict[str, list[tuple[str, str]]] = {}  # dataset -> [(label, folder)]; "dataset/label=folder" labels one
    for r in args.runs:
        name, folder = r.split("=", 1)
        dataset, _, label = name.partition("/")
        runs.setdefault(dataset, []).append((label or "transformer", folder))
    rows = []
    for name in args.datasets:
        splits = load_splits(args.data_root / name)
        if labels := sorted(set(splits["train"]["label"]) - {0, 1}):
            raise SystemExit(
                f"{name}: NBSVM needs the labels 0 and 1, train also has {labels}: name two-class datasets"
            )
        for fit, ngram in ((tfidf, 1), (tfidf, 2), (nbsvm, 2), (nbsvm, 3)):
            rows.append(fit(name, splits, ngram))
            r, beta = rows[-1], f"beta={rows[-1]['beta']}" if fit is nbsvm else ""
            print(
                f"{r['dataset']:<16} {r['features']:<16} C={r['C']:<5} {beta:<9} val {r['val_acc']:.4f}  "
                f"test {r['test_acc']:.4f}  ({r['seconds']} s)",
                flush=True,
            )
        for label, folder in runs.get(name, []):
            t = transformer_results(Path(folder))
            rows.append({"dataset": name, "features": label, "folder": folder, **t})
            if t["runs"]:
                draws = (f"  seeds +- {t['std_seeds']:.4f}, draws +- {t['std_draws']:.4f} {t['draw_means']}"
                         if "draw_means" in t else "")  # fmt: skip
                print(
                    f"{name:<16} {label:<16} {t['runs']} run(s)  test {t['test_mean']:.4f} "
                    f"+- {t['test_std']:.4f}  {[round(a, 4) for a in t['test_acc']]}  encoder from: "
                    f"{', '.join(t['init_from'])}{draws}",
                    flush=True,
                )
    rows += earlier_runs(args.json, rows, args.datasets)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
