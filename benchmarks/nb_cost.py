"""What the naive-Bayes n-gram term (model.nb_ngram_max=3) costs the IMDB recipe: its training step against the
same model without it, side by side in one process, and the count of its ratios on the training split.

    python benchmarks/nb_cost.py [--rounds 15] [--texts 2000]

Model: the IMDB recipe's (experiment=imdb: d_model 64, 4 heads, 1 layer, ff 128, mean pooling, 2^17 word-pair
rows, 1,024 tokens, AdamW with weight decay, gradients clipped to norm 1), with and without the term (2^22 rows
of 1- to 3-grams). A batch of 32 rows of token ids drawn from a 10,000-word vocabulary, their lengths those of
IMDB's reviews in the recipe's tokens (a length-bucketed batch: all near 300). The step is zero_grad, forward,
cross-entropy, backward, clipping, AdamW step; both models are timed in interleaved rounds (median). The count:
`NgramEvidence.fit` on `--texts` rows of 300 tokens, scaled to the 22,476 training reviews. The whole recipe's
time with the term over without: (vectors + count + 1,406 steps with it) over (vectors + 1,406 steps without),
the vectors' time as measured by the recipe's runs on this machine (`--vectors-s`).
Prints a table and writes benchmarks/results/nb_cost.json.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from common import RESULTS, interleaved_times, machine, set_threads, table, write_json

from transformer_attention.model import TransformerClassifier
from transformer_attention.model.evidence import NgramEvidence

RECIPE = dict(
    d_model=64, num_heads=4, num_layers=1, dim_feedforward=128, max_len=1024, dropout=0.3, pooling="mean",
    attention_dropout=0.0, ngram_buckets=131072,
)  # fmt: skip
VOCAB, STEPS, TRAIN_TEXTS, LENGTH = 10_000, 1406, 22_476, 300


def step_fn(nb: int, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.nn.Module, object]:
    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=VOCAB, num_classes=2, nb_ngram_max=nb, **RECIPE).train()
    if net.evidence is not None:
        net.evidence.fit(list(ids), labels.tolist())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
    mask = ids != 0

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(ids, mask).logits, labels, label_smoothing=0.1).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()

    return net, step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--vectors-s", type=float, default=None, help="the skip-gram vectors' seconds, if known")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    set_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (32, LENGTH), generator=g)
    labels = torch.randint(0, 2, (32,), generator=g)
    _, without = step_fn(0, ids, labels)
    _, with_term = step_fn(3, ids, labels)
    times = interleaved_times({"without the term": without, "with the term": with_term}, rounds=args.rounds)
    texts = [row for row in torch.randint(1, VOCAB, (args.texts, LENGTH), generator=g)]
    start = time.perf_counter()
    NgramEvidence(VOCAB, 2, 2**22, 3).fit(texts, [i % 2 for i in range(args.texts)])
    count_s = (time.perf_counter() - start) * TRAIN_TEXTS / args.texts
    old, new = times["without the term"]["median_s"], times["with the term"]["median_s"]
    rows = [{"what": name, "s": t["median_s"], "ratio": t["median_s"] / old} for name, t in times.items()]
    print(table(rows, [("what", "training step", "s"), ("s", "median s", ".4f"), ("ratio", "x without", ".2f")]))
    print(f"counting the ratios on {TRAIN_TEXTS:,} reviews: {count_s:.0f} s")
    whole = None
    if args.vectors_s is not None:
        whole = (args.vectors_s + count_s + STEPS * new) / (args.vectors_s + STEPS * old)
        print(f"the whole recipe with the term over without (vectors {args.vectors_s:.0f} s): {whole:.2f}x")
    write_json(
        RESULTS / "nb_cost.json",
        {
            "command": "python benchmarks/nb_cost.py" + (f" --vectors-s {args.vectors_s:g}" if args.vectors_s else ""),
            "machine": machine(),
            "steps": times,
            "step_ratio": new / old,
            "count_s": count_s,
            "vectors_s": args.vectors_s,
            "whole_ratio": whole,
        },
    )


if __name__ == "__main__":
    main()
