"""The training step of this tree's model against the model of an earlier revision, side by side.

    python benchmarks/versions.py [--base HEAD] [--rounds 9] [--seq 256] [--batch 32]

The base revision's `src/transformer_attention/model/` (it imports only torch) is taken with
`git archive` and loaded under another name, so both versions run in one process, timed in
interleaved rounds (median). Sizes as benchmarks/train_step.py: d_model 128, 4 heads, 2 layers,
ff 256, batch 32 x seq 256 with ~30% padding, AdamW. Both models start from the same weights.
"cls-only" is the classifier's own forward (the training path); "every row" runs the whole last
layer.
Prints a table and writes benchmarks/results/versions.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from common import RESULTS, interleaved_times, machine, set_threads, table, write_json
from torch import nn
from train_step import make_batch

import transformer_attention.model as current

ROOT = Path(__file__).resolve().parents[1]
MODEL = "src/transformer_attention/model"
SIZES = {"d_model": 128, "num_heads": 4, "num_layers": 2, "dim_feedforward": 256, "max_len": 1024}
# name -> (settings, cls_only); the first is the training default of conf/model
SDPA, MATH = ({"attention_impl": impl} for impl in ("sdpa", "math"))
WEIGHTS = {"dropout": 0.1, "attention_dropout": 0.1}  # dropout on the attention weights too
CASES = {
    "sdpa cls-only, dropout 0.1, attn 0 (default)": ({**SDPA, "dropout": 0.1}, True),
    "sdpa cls-only, dropout 0": ({**SDPA, "dropout": 0.0}, True),
    "math every row, dropout 0": ({**MATH, "dropout": 0.0}, False),
    "math every row, dropout 0.1 incl. weights": ({**MATH, **WEIGHTS}, False),
}


def load_base_model(rev: str, into: Path):
    """The `model` package of revision `rev`, imported as `base_model`."""
    archive = subprocess.run(["git", "archive", rev, MODEL], cwd=ROOT, capture_output=True, check=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(into, filter="data")
    folder = into / MODEL
    spec = importlib.util.spec_from_file_location(
        "base_model", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_model"] = module
    spec.loader.exec_module(module)
    return module


class Step(nn.Module):
    """One version's classifier; `cls_only=False` runs every row of the last layer."""

    def __init__(self, package, settings: dict, cls_only: bool):
        super().__init__()
        settings = {"attention_dropout": 0.0, **settings}
        self.net = package.TransformerClassifier(vocab_size=5000, num_classes=2, **SIZES, **settings)
        self.cls_only = cls_only

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.cls_only:
            return self.net(tokens, mask).logits
        net = self.net
        d_model = getattr(net, "d_model", None) or net.config.d_model
        x, _ = net.encoder(net.pos_encoder(net.embedding(tokens) * math.sqrt(d_model)), mask=mask)  # (B, T, D)
        return net.head(x[:, 0])  # (B, C)


def make_step(model: nn.Module, batch: dict[str, torch.Tensor]):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(batch["tokens"], batch["mask"]), batch["labels"]).backward()
        opt.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD", help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=RESULTS / "versions.json")
    args = parser.parse_args()
    set_threads(args.threads)
    batch = make_batch(args.batch, args.seq)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base_model(args.base, Path(tmp))
        fns, pairs = {}, []
        for name, (settings, cls_only) in CASES.items():
            torch.manual_seed(0)
            ours = Step(current, settings, cls_only)
            fns[f"this tree: {name}"] = make_step(ours, batch)
            try:
                theirs = Step(base, settings, cls_only)
            except TypeError:  # a setting the base version does not have
                pairs.append((name, None))
                continue
            theirs.load_state_dict(ours.state_dict())
            fns[f"{args.base}: {name}"] = make_step(theirs, batch)
            pairs.append((name, f"{args.base}: {name}"))
        times = interleaved_times(fns, rounds=args.rounds, warmup=2)
    base_default = times[f"{args.base}: {next(iter(CASES))}"]["median_s"]
    rows = []
    for name, base_key in pairs:
        ours_s = times[f"this tree: {name}"]["median_s"]
        base_s = times[base_key]["median_s"] if base_key else None
        rows.append(
            {
                "case": name,
                "base_ms": 1e3 * base_s if base_s else None,
                "ours_ms": 1e3 * ours_s,
                "ours_vs_base": ours_s / base_s if base_s else None,
                "ours_vs_base_default": ours_s / base_default,
            }
        )
    columns = [
        ("case", "case", "s"),
        ("base_ms", f"{args.base} ms", ".1f"),
        ("ours_ms", "this tree ms", ".1f"),
        ("ours_vs_base", "time x base", ".3f"),
        ("ours_vs_base_default", "x base default", ".3f"),
    ]
    print(table(rows, columns))
    write_json(
        args.json,
        {
            "benchmark": "training step: this tree's model vs a git revision's",
            "machine": machine(),
            "base": args.base,
            "config": {"batch": args.batch, "seq": args.seq, "rounds": args.rounds, **SIZES},
            "rows": rows,
            "times": times,
        },
    )


if __name__ == "__main__":
    main()
