"""Which memory allocator setting makes training fastest? glibc defaults, glibc tuned through
its documented environment variables, jemalloc and tcmalloc (LD_PRELOAD), side by side.

    python benchmarks/allocator.py [--rounds 3] [--workloads math_attention train_math train_sdpa]

An allocator is chosen when a process starts, so each setting runs in its own child process;
the rounds alternate the settings (A B C D, A B C D, ...) so load from elsewhere hits them
alike, and each figure is the median over rounds. Workloads (batch 32, d_model 128, 4 heads):
`math_attention` is MultiHeadAttention forward+backward on the math path at seq 256 (a 32 MiB
score tensor per op: glibc serves it with mmap and unmaps it on free, so every step page-faults
it in again); `train_*` is the benchmarks/train_step.py step (seq 256, dropout 0.1, attention
dropout 0) on that path. Minor page faults per call (getrusage) are reported with the times.
Settings whose library is not installed are skipped (apt-get install libjemalloc2
libtcmalloc-minimal4). Prints a table and writes benchmarks/results/allocator.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import RESULTS, machine, table, write_json

LIBS = Path("/usr/lib/x86_64-linux-gnu")
GLIBC_TUNED = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}
SETTINGS = {
    "glibc default": {},
    "glibc no mmap, no trim": GLIBC_TUNED,
    "jemalloc": {"LD_PRELOAD": str(LIBS / "libjemalloc.so.2")},
    "tcmalloc": {"LD_PRELOAD": str(LIBS / "libtcmalloc_minimal.so.4")},
}
WORKLOADS = ("math_attention", "train_math", "train_sdpa")


def child(workload: str, calls: int) -> dict:
    """Runs in the child process: time `calls` calls after two warm-up calls."""
    import torch
    from attention import make_batch as attn_batch
    from train_step import Ours, make_batch, make_step

    from transformer_attention.model import MultiHeadAttention

    if workload == "math_attention":
        torch.manual_seed(0)
        mha = MultiHeadAttention(128, 4, dropout=0.0, attention_impl="math")
        x, mask = attn_batch(32, 256, 128)
        x.requires_grad_()
        grad = torch.randn_like(x)

        def fn():
            mha.zero_grad(set_to_none=True)
            mha(x, mask=mask, need_weights=False)[0].backward(grad)
    else:
        torch.manual_seed(0)
        fn = make_step(Ours(workload.removeprefix("train_"), 0.1, 0.0), make_batch(32, 256), bf16=False)
    for _ in range(2):
        fn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {"median_s": statistics.median(times), "faults_per_call": faults / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(RESULTS / "allocator.json"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.calls)))
        return

    settings = {
        name: env for name, env in SETTINGS.items() if "LD_PRELOAD" not in env or Path(env["LD_PRELOAD"]).exists()
    }
    skipped = sorted(set(SETTINGS) - set(settings))
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for workload in args.workloads:
            for name, extra in settings.items():
                env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MALLOC_")}
                cmd = [sys.executable, __file__, "--child", workload, "--calls", str(args.calls)]
                out = subprocess.run(cmd, env=env | extra, capture_output=True, text=True, check=True).stdout
                results.setdefault((workload, name), []).append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for workload in args.workloads:
        base = statistics.median(r["median_s"] for r in results[(workload, "glibc default")])
        for name in settings:
            runs = results[(workload, name)]
            t = statistics.median(r["median_s"] for r in runs)
            rows.append(
                {
                    "workload": workload,
                    "allocator": name,
                    "ms": 1e3 * t,
                    "vs_default": base / t,
                    "faults": statistics.median(r["faults_per_call"] for r in runs),
                    "samples_s": [r["median_s"] for r in runs],
                    "env": settings[name],
                }
            )
        print(table(rows[-len(settings) :], COLUMNS), flush=True)
    print(
        "\nallocators, median over rounds of alternating child processes"
        + (f" (skipped, not installed: {', '.join(skipped)})" if skipped else "")
    )
    print(table(rows, COLUMNS))
    write_json(
        Path(args.json),
        {
            "benchmark": "memory allocators",
            "machine": machine(),
            "config": vars(args),
            "skipped": skipped,
            "rows": rows,
        },
    )


COLUMNS = [
    ("workload", "workload", "s"),
    ("allocator", "allocator", "s"),
    ("ms", "ms / call", ".1f"),
    ("vs_default", "x default", ".2f"),
    ("faults", "page faults / call", ".0f"),
]

if __name__ == "__main__":
    main()
