"""Data loading on IMDB: tokenization time, padding with and without length bucketing, epoch-time ratio.

    python benchmarks/data_loading.py [--data ../shared/data/imdb] [--max-length 256] [--epoch-reviews 1024]

Measures, on the 50,000 IMDB reviews of `--data` (train 25k, test 25k, parquet):
- the data module's set-up, cold (load + checks + tokenizer training + tokenizing all 50k) and again from
  its cache; the tokenizer training and the tokenization of the 50k reviews timed on their own;
- the padded fraction of training batches (pad tokens / all tokens of a padded batch, mean over the
  batches of one epoch), random batches vs `bucket_by_length=true`;
- the time of one training epoch (forward, backward, AdamW step) of a small model (the default
  `conf/model/transformer.yaml` encoder: d_model 64, 4 heads, 2 layers) on `--epoch-reviews` training
  reviews, random vs bucketed batches, interleaved over `--rounds` rounds (median), so that load from other
  processes hits both alike.
Prints a table and writes JSON (default benchmarks/results/data_loading.json).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Subset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, machine, table, write_json  # noqa: E402

from transformer_attention.data import BucketBatchSampler, EncodedDataset, ReviewDataModule, collate  # noqa: E402
from transformer_attention.data.tokenizer import encode, train_tokenizer  # noqa: E402
from transformer_attention.model import TransformerClassifier  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def padded_fractions(batches: list[list[int]], lengths: np.ndarray) -> tuple[float, float]:
    """(mean over batches of pad / (B x T), pad / all tokens over the epoch)."""
    per_batch, pad_total, all_total = [], 0, 0
    for b in batches:
        rows = lengths[b]
        cells = len(b) * int(rows.max())
        per_batch.append(1 - rows.sum() / cells)
        pad_total, all_total = pad_total + cells - int(rows.sum()), all_total + cells
    return float(np.mean(per_batch)), pad_total / all_total


def samplers(ds, batch_size: int, seed: int) -> dict[str, BatchSampler]:
    lengths = getattr(ds, "lengths", None)
    if lengths is None:  # a Subset: the lengths of its rows
        lengths = ds.dataset.lengths[ds.indices]
    return {
        "random": BatchSampler(RandomSampler(ds), batch_size, drop_last=False),
        "bucketed": BucketBatchSampler(RandomSampler(ds), batch_size, lengths=lengths, seed=seed),
    }


def train_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader: DataLoader) -> int:
    model.train()
    tokens = 0
    for batch in loader:
        logits = model(batch["input_ids"], batch["attention_mask"]).logits
        loss = F.cross_entropy(logits, batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += batch["input_ids"].numel()
    return tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "imdb"))
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--vocab-size", type=int, default=16000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epoch-reviews", type=int, default=1024, help="training reviews in the timed epoch")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=str(RESULTS / "data_loading.json"))
    args = p.parse_args()
    torch.manual_seed(args.seed)
    settings = {"name": "local", "path": args.data, "max_length": args.max_length, "vocab_size": args.vocab_size}

    with tempfile.TemporaryDirectory() as cache_dir:
        cold = ReviewDataModule(**settings, cache_dir=cache_dir)
        _, t_cold = timed(lambda: cold.setup("fit"))
        warm = ReviewDataModule(**settings, cache_dir=cache_dir)
        _, t_warm = timed(lambda: warm.setup("fit"))
    texts = [t for split in ("train", "validation", "test") for t in cold.raw[split]["text"]]
    tok, t_tok_train = timed(lambda: train_tokenizer(cold.raw["train"]["text"], args.vocab_size, 2))
    ids, t_encode = timed(lambda: encode(tok, texts, args.max_length))
    lengths = np.array([len(r) for r in ids])
    print(
        f"set-up cold {t_cold:.1f}s, cached {t_warm:.1f}s; tokenizer training {t_tok_train:.1f}s; "
        f"tokenizing {len(texts)} reviews {t_encode:.1f}s"
    )

    train: EncodedDataset = cold.splits["train"]
    padding = {}
    for name, sampler in samplers(train, args.batch_size, args.seed).items():
        padding[name] = padded_fractions(list(sampler), train.lengths)

    subset = Subset(train, torch.randperm(len(train))[: args.epoch_reviews].tolist())
    sub_padding, times = {}, {"random": [], "bucketed": []}
    model = TransformerClassifier(
        vocab_size=cold.vocab_size,
        num_classes=cold.num_classes,
        max_len=max(512, args.max_length),
        attention_impl="math",
        attention_dropout=None,  # the settings this benchmark was measured with
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loaders = {
        name: DataLoader(subset, batch_sampler=s, collate_fn=collate)
        for name, s in samplers(subset, args.batch_size, args.seed).items()
    }
    for name, loader in loaders.items():
        sub_padding[name] = padded_fractions(list(loader.batch_sampler), subset.dataset.lengths[subset.indices])
    warmup = Subset(train, list(range(2 * args.batch_size)))
    train_epoch(model, optimizer, DataLoader(warmup, batch_size=args.batch_size, collate_fn=collate))
    for r in range(args.rounds):
        for name, loader in loaders.items():
            tokens, seconds = timed(lambda loader=loader: train_epoch(model, optimizer, loader))
            times[name].append(seconds)
            print(f"round {r}: {name:>8} epoch {seconds:6.1f}s, {tokens} padded tokens")

    rows = []
    for name in ("random", "bucketed"):
        rows.append(
            {
                "batches": name,
                "pad_mean": padding[name][0],
                "pad_all": padding[name][1],
                "sub_pad": sub_padding[name][0],
                "epoch_s": statistics.median(times[name]),
            }
        )
    ratio = rows[0]["epoch_s"] / rows[1]["epoch_s"]
    print(
        table(
            rows,
            [
                ("batches", "batches", ""),
                ("pad_mean", "padded (mean/batch, train)", ".3f"),
                ("pad_all", "padded (all tokens, train)", ".3f"),
                ("sub_pad", f"padded (timed {args.epoch_reviews})", ".3f"),
                ("epoch_s", f"epoch s ({args.epoch_reviews} reviews)", ".1f"),
            ],
        )
    )
    print(f"epoch-time ratio random / bucketed: {ratio:.2f}x")
    write_json(
        Path(args.json),
        {
            "benchmark": "data_loading",
            "command": "python benchmarks/data_loading.py " + " ".join(sys.argv[1:]),
            "args": vars(args),
            "machine": machine(),
            "reviews": len(texts),
            "splits": {k: len(v) for k, v in cold.splits.items()},
            "tokens_per_review": {
                "mean": float(lengths.mean()),
                "median": float(np.median(lengths)),
                "truncated_fraction": float((lengths == args.max_length).mean()),
            },
            "setup_cold_s": t_cold,
            "setup_cached_s": t_warm,
            "tokenizer_train_s": t_tok_train,
            "tokenize_all_s": t_encode,
            "epoch": "one training epoch (forward, backward, AdamW) of TransformerClassifier(d_model=64, heads=4, "
            f"layers=2, ff=128), {args.epoch_reviews} train reviews, batch {args.batch_size}, median of rounds",
            "rows": rows,
            "epoch_times_s": times,
            "epoch_time_ratio_random_over_bucketed": ratio,
        },
    )


if __name__ == "__main__":
    main()
