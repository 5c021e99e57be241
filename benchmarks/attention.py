"""Multi-head attention forward+backward: time and peak memory against sequence length.

    python benchmarks/attention.py [--seqs 128 256 512 1024 2048] [--rounds 5] [--dropout 0.0]

Batch 32, d_model 128, 4 heads, about 30% padding (row lengths uniform in [0.4 T, T]).
Side by side in one process: our MultiHeadAttention with attention_impl = math, sdpa,
and torch.nn.MultiheadAttention (need_weights=False, so it runs torch's fused SDPA kernel).
Each candidate is the whole module (QKV projection, attention, output projection), timed on
forward + backward with interleaved rounds (median). Peak memory is the largest amount of
tensor memory allocated above the starting point during one forward + backward, measured with
torch.profiler(profile_memory=True) in a separate, untimed call.
Prints two tables (per sequence length; growth exponents) and writes benchmarks/results/attention.json.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
from common import RESULTS, interleaved_times, machine, peak_memory_bytes, set_threads, table, write_json
from torch import nn

from transformer_attention.model import MultiHeadAttention

IMPLS = ("math", "sdpa", "torch")


def make_batch(B: int, T: int, D: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(int(0.4 * T), T + 1, (B,), generator=g)
    lengths[0] = T  # the batch is padded to its longest row
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T) True = real token
    return torch.randn(B, T, D, generator=g), mask


def make_modules(D: int, H: int, dropout: float) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    mods: dict[str, nn.Module] = {
        impl: MultiHeadAttention(D, H, dropout=dropout, attention_impl=impl) for impl in IMPLS[:2]
    }
    mods["torch"] = nn.MultiheadAttention(D, H, dropout=dropout, batch_first=True)
    return mods


def step_fn(name: str, mod: nn.Module, x: torch.Tensor, mask: torch.Tensor, grad: torch.Tensor):
    x = x.clone().requires_grad_()
    pad = ~mask  # nn.MultiheadAttention's key_padding_mask: True = ignore

    def step() -> None:
        mod.zero_grad(set_to_none=True)
        x.grad = None
        if name == "torch":
            out, _ = mod(x, x, x, key_padding_mask=pad, need_weights=False)
        else:
            out, _ = mod(x, mask=mask, need_weights=False)  # self-attention: the fused QKV projection
        out.backward(grad)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0, help="attention-weight dropout, all candidates")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: one per core)")
    parser.add_argument("--json", default=str(RESULTS / "attention.json"))
    args = parser.parse_args()
    set_threads(args.threads)

    mods = make_modules(args.d_model, args.heads, args.dropout)
    for m in mods.values():
        m.train()
    rows = []
    for T in args.seqs:
        x, mask = make_batch(args.batch, T, args.d_model)
        grad = torch.randn_like(x)
        fns = {name: step_fn(name, mod, x, mask, grad) for name, mod in mods.items()}
        rounds = args.rounds if T <= 512 else max(2, args.rounds // 2)
        times = interleaved_times(fns, rounds=rounds)
        mem = {name: peak_memory_bytes(fn) for name, fn in fns.items()}
        for name in IMPLS:
            t = times[name]["median_s"]
            rows.append(
                {
                    "seq": T,
                    "impl": name,
                    "ms": 1e3 * t,
                    "cpu_ms": 1e3 * times[name]["median_cpu_s"],
                    "peak_mib": mem[name] / 2**20,
                    "speed_vs_torch": times["torch"]["median_s"] / t,
                    "speed_vs_math": times["math"]["median_s"] / t,
                    "mem_vs_math": mem[name] / mem["math"],
                    "samples_s": times[name]["samples_s"],
                    "padding": round(1 - mask.float().mean().item(), 3),
                }
            )
        print(table(rows[-len(IMPLS) :], COLUMNS), flush=True)

    growth = []
    for name in IMPLS:
        mine = [r for r in rows if r["impl"] == name]
        for a, b in zip(mine, mine[1:], strict=False):
            k = math.log(b["seq"] / a["seq"])
            growth.append(
                {
                    "impl": name,
                    "seqs": f"{a['seq']}->{b['seq']}",
                    "time_exp": math.log(b["ms"] / a["ms"]) / k,
                    "mem_exp": math.log(b["peak_mib"] / a["peak_mib"]) / k,
                }
            )
    print(
        f"\nforward+backward, batch {args.batch}, d_model {args.d_model}, {args.heads} heads, "
        f"attention dropout {args.dropout:g}"
    )
    print(table(rows, COLUMNS))
    print("\ngrowth: time ~ T^time_exp, memory ~ T^mem_exp between consecutive lengths")
    print(
        table(
            growth,
            [
                ("impl", "impl", "s"),
                ("seqs", "seqs", "s"),
                ("time_exp", "time exp", ".2f"),
                ("mem_exp", "mem exp", ".2f"),
            ],
        )
    )
    write_json(
        Path(args.json),
        {
            "benchmark": "attention forward+backward",
            "machine": machine(),
            "config": vars(args),
            "memory_method": "torch.profiler profile_memory=True: max running sum of tensor allocations",
            "rows": rows,
            "growth": growth,
        },
    )


COLUMNS = [
    ("seq", "seq", "d"),
    ("impl", "impl", "s"),
    ("ms", "fwd+bwd ms", ".1f"),
    ("speed_vs_torch", "x torch", ".2f"),
    ("speed_vs_math", "x math", ".2f"),
    ("peak_mib", "peak MiB", ".1f"),
    ("mem_vs_math", "mem / math", ".3f"),
]

if __name__ == "__main__":
    main()
