"""Does torch.compile pay for the classifier training step? Eager against compiled, per path.

    python benchmarks/compile.py [--impls sdpa math torch] [--rounds 5] [--precision fp32]

Same model, batch and step as benchmarks/train_step.py (dropout 0.1 on the residual and FFN
paths, attention dropout 0; our classifier's own forward, [CLS] row only in the last layer).
For each path: the compile time (the first compiled step minus an eager step), the steady step
time eager and compiled (interleaved rounds, median), the speed-up, and the number of steps
after which compiling has paid for itself.
Prints a table and writes benchmarks/results/compile.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import RESULTS, interleaved_times, machine, set_threads, table, write_json
from train_step import SIZES, Ours, TorchEncoderClassifier, make_batch, make_step


def build(impl: str, dropout: float, attention_dropout: float) -> torch.nn.Module:
    torch.manual_seed(0)
    if impl == "torch":
        return TorchEncoderClassifier(**SIZES, dropout=dropout)
    return Ours(impl, dropout, attention_dropout, cls_only=True)  # the classifier's own forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impls", nargs="+", default=["sdpa", "math", "torch"])
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--attention-dropout", type=float, default=0.0)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: one per core)")
    parser.add_argument("--json", default=str(RESULTS / "compile.json"))
    args = parser.parse_args()
    set_threads(args.threads)

    batch = make_batch(args.batch, args.seq)
    bf16 = args.precision == "bf16"
    rows = []
    for impl in args.impls:
        eager = make_step(build(impl, args.dropout, args.attention_dropout), batch, bf16)
        compiled_model = torch.compile(build(impl, args.dropout, args.attention_dropout))
        compiled = make_step(compiled_model, batch, bf16)
        eager()
        start = time.perf_counter()
        try:
            compiled()  # compiles forward and backward
        except Exception as err:  # noqa: BLE001 - a path that does not compile is a result, not a crash
            rows.append({"impl": impl, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"})
            print(f"{impl}: torch.compile failed: {rows[-1]['error']}", flush=True)
            continue
        first = time.perf_counter() - start
        times = interleaved_times({"eager": eager, "compiled": compiled}, rounds=args.rounds, warmup=1)
        e, c = times["eager"]["median_s"], times["compiled"]["median_s"]
        compile_s = first - e
        rows.append(
            {
                "impl": impl,
                "compile_s": compile_s,
                "eager_ms": 1e3 * e,
                "compiled_ms": 1e3 * c,
                "speedup": e / c,
                "break_even_steps": compile_s / (e - c) if e > c else None,
                "samples_s": {k: v["samples_s"] for k, v in times.items()},
            }
        )
        print(table(rows[-1:], COLUMNS), flush=True)
    print(
        f"\ntorch.compile, training step batch {args.batch} x seq {args.seq}, {args.precision}, "
        f"dropout {args.dropout}, attention dropout {args.attention_dropout}"
    )
    print(table([r for r in rows if "error" not in r], COLUMNS))
    for r in rows:
        if "error" in r:
            print(f"{r['impl']}: {r['error']}")
    write_json(
        Path(args.json),
        {
            "benchmark": "torch.compile of the training step",
            "machine": machine(),
            "config": vars(args) | SIZES,
            "rows": rows,
        },
    )


COLUMNS = [
    ("impl", "path", "s"),
    ("compile_s", "compile s", ".1f"),
    ("eager_ms", "eager ms", ".1f"),
    ("compiled_ms", "compiled ms", ".1f"),
    ("speedup", "speed-up", ".2f"),
    ("break_even_steps", "pays after", ".0f"),
]

if __name__ == "__main__":
    main()
