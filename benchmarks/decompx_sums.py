"""DecompX as its paper defines it on trained checkpoints: do its parts still sum to the logits (float64), and
what does it cost a text beside the project's variant, side by side on the same texts:

    OMP_NUM_THREADS=1 python benchmarks/decompx_sums.py \\
        rotten_tomatoes=<rt run>/checkpoints/epoch_003.ckpt:../shared/data/rotten_tomatoes \\
        imdb=<imdb run>/checkpoints/epoch_002.ckpt:../shared/data/movie_rationales [--texts 20] \\
        [--json benchmarks/results/decompx_sums.json]

Each `name=checkpoint:data folder` reads the first `--texts` texts of the folder's test.parquet as evaluate.py
reads them (the checkpoint's tokenizer, cut at its trained length), one text at a time, and gives the largest
|tokens + unshared - the model's logits| of `decompx_paper` (biases shared by AbsDot, each part propagated on its
own) over the texts and classes, and the seconds per text of it and of `decompx` (interleaved, the same texts,
this process's threads). `decompx` needs no such check: its bias is what the tokens, positions and n-grams leave
of the logits, by definition (tests/test_decompx*.py hold its parts to their oracles).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch
from common import RESULTS, machine, set_threads, write_json

from transformer_attention.analysis.methods.decompx import decompx
from transformer_attention.analysis.methods.decompx_paper import decompx_paper
from transformer_attention.data.tokenizer import encode, load_tokenizer
from transformer_attention.inference import pad_id_of, trained_length
from transformer_attention.training.checkpoint import load_module


def measure(ckpt: str, data: Path, texts: int) -> dict:
    module = load_module(ckpt)
    net = module.net.eval().double().requires_grad_(False)
    tok = load_tokenizer(module.tokenizer_json)
    length = trained_length(module)
    rows = encode(tok, [str(t) for t in pd.read_parquet(data / "test.parquet")["text"][:texts]], length)
    error = 0.0
    seconds = {"decompx": 0.0, "decompx_paper": 0.0}
    for row in rows:
        ids = torch.tensor([list(row)])
        mask = ids != pad_id_of(net)
        start = time.perf_counter()
        decompx(net, ids, mask)
        seconds["decompx"] += time.perf_counter() - start
        start = time.perf_counter()
        paper = decompx_paper(net, ids, mask)
        seconds["decompx_paper"] += time.perf_counter() - start
        gap = (paper.tokens.sum(1) + paper.unshared - paper.logits).abs().max()
        error = max(error, float(gap))
    lengths = [len(r) for r in rows]
    return {
        "checkpoint": ckpt,
        "data": str(data / "test.parquet"),
        "texts": len(rows),
        "tokens_mean": sum(lengths) / len(lengths),
        "tokens_max": max(lengths),
        "paper_max_abs_error": error,
        "seconds_per_text": {k: v / len(rows) for k, v in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="name=<checkpoint>:<data folder with test.parquet>")
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=RESULTS / "decompx_sums.json")
    args = parser.parse_args()
    set_threads(args.threads)
    found = {}
    for item in args.runs:
        name, _, where = item.partition("=")
        ckpt, _, data = where.rpartition(":")
        found[name] = measure(ckpt, Path(data), args.texts)
        seconds = found[name]["seconds_per_text"]
        print(
            f"{name}: {found[name]['texts']} texts of {found[name]['tokens_mean']:.0f} tokens on average; "
            f"decompx_paper's largest |sum - logits| {found[name]['paper_max_abs_error']:.1e}; "
            f"s / text: decompx {seconds['decompx']:.3f}, decompx_paper {seconds['decompx_paper']:.3f}"
        )
    write_json(args.json, {"command": __doc__.split("\n\n")[1].strip(), "machine": machine(), "runs": found})


if __name__ == "__main__":
    main()
