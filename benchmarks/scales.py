"""How much of the colour range each colour scale uses on a trained model's attention maps: what the default
scale (`plotting/scales.py`) was chosen by.

    python benchmarks/scales.py --run outputs/train/runs/<time> [--run ...] [--json benchmarks/results/scales.json]

For each run folder (its best checkpoint, its config's data) it picks the examples the run's maps show
(`AttentionMapLogger`'s validation examples, 4 by default), runs the model on them and, for every map the
callback logs (each head and the mean of heads of each layer, windowed to `max_tokens` as logged), takes the
share of the colour range its cells use: the spread between the 5th and 95th percentile of their colour
values (0 to 1). It prints the median over the maps for each scale and, beside it, whether a map still reads as
on the fixed 0-1 scale: the share of its cell pairs whose colours are in the order of their weights (1: a
brighter cell is always a larger weight, as on the fixed scale) and the mean |change| of the colours.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from common import write_json
from omegaconf import OmegaConf

from transformer_attention.callbacks.examples import choose_examples
from transformer_attention.inference import infer
from transformer_attention.plotting import attention_rollout, pooled_rollout
from transformer_attention.plotting.scales import DEFAULT_SCALE, SCALES, scaled
from transformer_attention.plotting.windows import key_window
from transformer_attention.training.builders import build_data
from transformer_attention.training.checkpoint import load_module


def run_maps(run: Path, examples: int, max_tokens: int) -> tuple[str, list[np.ndarray]]:
    """The (n, n) maps the run's attention images show: each head, then the mean of heads, of every layer."""
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    ckpt = sorted((run / "checkpoints").glob("epoch_*.ckpt"))[-1]
    module = load_module(str(ckpt))
    cfg.paths.output_dir = str(run)  # was Hydra's runtime folder
    data = OmegaConf.to_container(cfg.data, resolve=True)
    dm = build_data(data, output_dir=str(run), tokenizer=module.tokenizer_json, label_names=module.hparams.label_names)
    dm.setup("validate")
    chosen = choose_examples(dm, "validation", examples, [], labelled=True)
    pooling = module.hparams.get("pooling") or "cls"
    maps = []
    for row in infer(module, [e.ids for e in chosen], need_weights=True):
        layers = [w.numpy() for w in row.attentions]  # each (H, T, T)
        keep = key_window(pooled_rollout(attention_rollout(layers), pooling), max_tokens)
        for weights in layers:
            shown = weights[:, keep][:, :, keep]  # (H, n, n)
            maps += [*shown, shown.mean(axis=0)]
    return f"{cfg.data.name.rsplit('/', 1)[-1]} ({ckpt.name}, {pooling})", maps


def colour_span(values: np.ndarray) -> float:
    """The share of the 0-1 colour range the middle 90% of `values` spans."""
    low, high = np.percentile(values, [5, 95])
    return float(high - low)


def order_kept(colour: np.ndarray, weights: np.ndarray) -> float:
    """The share of cell pairs of unequal weight whose colours keep the order of their weights."""
    c, w = colour.ravel(), weights.ravel()
    dw, dc = np.sign(w[:, None] - w[None, :]), np.sign(c[:, None] - c[None, :])  # (cells, cells)
    differ = dw != 0
    return float((dw == dc)[differ].mean()) if differ.any() else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, action="append", required=True, help="a train run's folder")
    parser.add_argument("--examples", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = {}
    print(f"{'run':<44} {'scale':<18} {'colour range used':>17} {'order kept':>10} {'|change|':>8}")
    for run in args.run:
        name, maps = run_maps(run, args.examples, args.max_tokens)
        results[name] = {"maps": len(maps)}
        for scale in SCALES:
            span = float(np.median([colour_span(scaled(m, scale)) for m in maps]))
            moved = float(np.mean([np.abs(scaled(m, scale) - scaled(m, "fixed")).mean() for m in maps]))
            kept = float(np.mean([order_kept(scaled(m, scale), m) for m in maps]))
            results[name][scale] = {"colour_range_used": span, "order_kept": kept, "mean_change": moved}
            mark = " (default)" if scale == DEFAULT_SCALE else ""
            print(f"{name:<44} {scale + mark:<18} {span:>17.2f} {kept:>10.3f} {moved:>8.3f}")
    if args.json:
        write_json(args.json, {"median over maps": results})


if __name__ == "__main__":
    main()
