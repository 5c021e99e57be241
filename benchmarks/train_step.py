"""A full classifier training step: our TransformerClassifier against the same model built on
torch.nn.TransformerEncoder, side by side in one process.

    python benchmarks/train_step.py [--rounds 7] [--seq 256] [--batch 32]

Model: d_model 128, 4 heads, 2 layers, ff 256, post-norm, [CLS] pooling, AdamW; batch 32 of
seq 256 with about 30% padding (row lengths uniform in [0.4 T, T]). The step is zero_grad,
forward, cross-entropy, backward, AdamW step. The torch model shares our embedding, sinusoidal
positions and head, so only the encoder differs; it gets the same dropout (residual, FFN and
attention weights) and the same padding mask (as src_key_padding_mask).

Groups: dropout 0 and 0.1, fp32 and bf16 (torch.autocast, as trainer.precision=bf16-mixed).
In each group every candidate is timed in interleaved rounds (median); the ratio is torch's
step time over ours (> 1: ours is faster). Rows named by a path alone are like for like: every
row of every layer, the same dropout on the attention weights. "attn_dropout=0" rows keep the
dropout on the residual and FFN paths but none on the attention weights (model.attention_dropout=0);
"cls-only" rows are our classifier's own forward, whose last layer computes only the [CLS] row.
Achieved FLOP/s: the model's matmul FLOPs per step (counted with FlopCounterMode on the math
path: the dense computation every candidate performs) over the step time, against a
2048^3 torch.matmul in the same dtype, timed in the same interleaved rounds as the steps.
Prints a table and writes benchmarks/results/train_step.json.
"""

from __future__ import annotations

import argparse
import contextlib
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from common import RESULTS, interleaved_times, machine, matmul_step, set_threads, table, write_json
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from transformer_attention.model import SinusoidalPositionalEncoding, TransformerClassifier

MATMUL = "2048^3 matmul"
SIZES = {"d_model": 128, "num_heads": 4, "num_layers": 2, "dim_feedforward": 256}
VOCAB, CLASSES, PAD, CLS = 5000, 2, 0, 2


class TorchEncoderClassifier(nn.Module):
    """Our classifier with torch.nn.TransformerEncoder as the encoder: the baseline."""

    def __init__(self, d_model: int, num_heads: int, num_layers: int, dim_feedforward: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos_encoder = SinusoidalPositionalEncoding(d_model, 1024, dropout)
        layer = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, CLASSES)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.pos_encoder(self.embedding(tokens) * math.sqrt(self.d_model))  # (B, T, D)
        x = self.encoder(x, src_key_padding_mask=~mask)  # torch's mask: True = ignore
        return self.head(x[:, 0])  # (B, C)


class Ours(nn.Module):
    """Our TransformerClassifier. `cls_only=False` runs every row of the last layer, as the torch
    model must (like for like); True is the classifier's own forward, which computes only the
    [CLS] row there because [CLS] pooling reads nothing else."""

    def __init__(self, impl: str, dropout: float, attention_dropout: float, cls_only: bool = False):
        super().__init__()
        self.cls_only = cls_only
        self.net = TransformerClassifier(
            vocab_size=VOCAB,
            num_classes=CLASSES,
            **SIZES,
            max_len=1024,
            dropout=dropout,
            attention_dropout=attention_dropout,
            attention_impl=impl,
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.cls_only:
            return self.net(tokens, mask).logits
        net = self.net
        x = net.pos_encoder(net.embedding(tokens) * math.sqrt(net.config.d_model))  # (B, T, D)
        x, _ = net.encoder(x, mask=mask)  # every row of every layer
        return net.head(x[:, 0])  # (B, C)


def make_batch(B: int, T: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(int(0.4 * T), T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    tokens = torch.randint(3, VOCAB, (B, T), generator=g).masked_fill(~mask, PAD)
    tokens[:, 0] = CLS
    return {"tokens": tokens, "mask": mask, "labels": torch.randint(0, CLASSES, (B,), generator=g)}


def make_step(model: nn.Module, batch: dict[str, torch.Tensor], bf16: bool):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with ctx:
            logits = model(batch["tokens"], batch["mask"])
        F.cross_entropy(logits.float(), batch["labels"]).backward()
        opt.step()

    return step


def model_flops(batch: dict[str, torch.Tensor], cls_only: bool = False) -> int:
    """Matmul FLOPs of one forward + backward of the dense computation (math path, no dropout)."""
    model = Ours("math", 0.0, 0.0, cls_only)
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(batch["tokens"], batch["mask"]), batch["labels"]).backward()
    return counter.get_total_flops()


def candidates(dropout: float) -> dict[str, tuple[str, float, bool]]:
    """name -> (impl, attention dropout, cls_only). Like for like first: every row, the same dropout on the
    attention weights as torch's layer; then our other settings, the last row the default step."""
    names = {"torch": ("torch", dropout, False)}
    names |= {impl: (impl, dropout, False) for impl in ("math", "sdpa")}
    if dropout > 0:
        names["sdpa attn_dropout=0"] = ("sdpa", 0.0, False)
    names["sdpa cls-only"] = ("sdpa", dropout, True)
    if dropout > 0:
        names["sdpa cls-only attn_dropout=0"] = ("sdpa", 0.0, True)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=SIZES["d_model"])
    parser.add_argument("--ff", type=int, default=SIZES["dim_feedforward"], help="dim_feedforward")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dropouts", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: one per core)")
    parser.add_argument("--json", default=str(RESULTS / "train_step.json"))
    args = parser.parse_args()
    set_threads(args.threads)
    SIZES.update(d_model=args.d_model, dim_feedforward=args.ff)

    batch = make_batch(args.batch, args.seq)
    flops = {cls_only: model_flops(batch, cls_only) for cls_only in (False, True)}
    ceiling = {}
    tokens = batch["mask"].numel()  # padded positions are computed too: count them, like torch's
    rows = []
    for precision in args.precisions:
        for dropout in args.dropouts:
            fns = {}
            for name, (impl, attn_p, cls_only) in candidates(dropout).items():
                torch.manual_seed(0)
                if impl == "torch":
                    model = TorchEncoderClassifier(**SIZES, dropout=dropout)
                else:
                    model = Ours(impl, dropout, attn_p, cls_only)
                fns[name] = make_step(model, batch, precision == "bf16")
            matmul, matmul_flop = matmul_step(torch.bfloat16 if precision == "bf16" else torch.float32)
            fns[MATMUL] = matmul  # the ceiling, timed among the candidates: under the same load
            times = interleaved_times(fns, rounds=args.rounds, warmup=2)
            ceiling[f"{precision} dropout {dropout:g}"] = c = matmul_flop / times.pop(MATMUL)["median_s"]
            base = times["torch"]["median_s"]
            for name, t in times.items():
                s, f = t["median_s"], flops["cls-only" in name]
                rows.append(
                    {
                        "precision": precision,
                        "dropout": dropout,
                        "model": name,
                        "step_ms": 1e3 * s,
                        "tokens_per_s": tokens / s,
                        "vs_torch": base / s,
                        "cpu_ms": 1e3 * t["median_cpu_s"],
                        "cpu_vs_torch": times["torch"]["median_cpu_s"] / t["median_cpu_s"],
                        "tflops": f / s / 1e12,
                        "of_ceiling": f / s / c,
                        "samples_s": t["samples_s"],
                    }
                )
            print(table(rows[-len(fns) :], COLUMNS), flush=True)
    print(
        f"\ntraining step, batch {args.batch} x seq {args.seq}, {SIZES}, AdamW; "
        f"model FLOPs/step {flops[False] / 1e9:.1f} G ({flops[True] / 1e9:.1f} G cls-only); matmul ceiling "
        + ", ".join(f"{p} {c / 1e12:.2f} TFLOP/s" for p, c in ceiling.items())
    )
    print(table(rows, COLUMNS))
    write_json(
        Path(args.json),
        {
            "benchmark": "classifier training step vs torch.nn.TransformerEncoder",
            "machine": machine(),
            "config": vars(args) | SIZES,
            "model_flops_per_step": {"all_rows": flops[False], "cls_only": flops[True]},
            "matmul_ceiling_flops": ceiling,
            "rows": rows,
        },
    )


COLUMNS = [
    ("precision", "prec", "s"),
    ("dropout", "dropout", "g"),
    ("model", "model", "s"),
    ("step_ms", "step ms", ".1f"),
    ("tokens_per_s", "tokens/s", ".0f"),
    ("vs_torch", "x torch", ".2f"),
    ("tflops", "TFLOP/s", ".3f"),
    ("of_ceiling", "of matmul", ".1%"),
]

if __name__ == "__main__":
    main()
