"""The README's performance tables, as Markdown, from the JSON files the benchmarks wrote.

python benchmarks/report.py [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from common import RESULTS


def markdown(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [("-" if row.get(k) is None else format(row[k], f)) for k, _, f in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine_line(data: dict) -> str:
    m = data["machine"]
    env = " ".join(f"{k}={v}" for k, v in m["allocator_env"].items()) or "glibc malloc defaults"
    loads = [f"{m[k]:.2f} at the {k.rsplit('_', 1)[1]}" for k in ("load_avg_at_start", "load_avg_at_end") if k in m]
    load = f"; 1-minute load average {' and '.join(loads)} (its own threads included)" if loads else ""
    return f"_{m['cpu']}, {m['cores']} cores, {m['threads']} torch threads, torch {m['torch']}, {env}{load}._"


def train_step(data: dict) -> str:
    cfg = data["config"]
    cols = [
        ("precision", "precision", "s"),
        ("dropout", "dropout", "g"),
        ("model", "model", "s"),
        ("step_ms", "step ms", ".0f"),
        ("tokens_per_s", "tokens/s", ",.0f"),
        ("vs_torch", "x torch", ".2f"),
        ("of_ceiling", "of matmul ceiling", ".0%"),
    ]
    ceil = ", ".join(f"{k} {v / 1e12:.2f}" for k, v in data["matmul_ceiling_flops"].items())
    return (
        f"Training step, batch {cfg['batch']} x seq {cfg['seq']}, d_model {cfg['d_model']}, "
        f"{cfg['num_heads']} heads, {cfg['num_layers']} layers, ff {cfg['dim_feedforward']}, AdamW "
        f"({cfg['rounds']} interleaved rounds, median). Matmul ceiling (TFLOP/s): {ceil}.\n\n"
        + markdown(data["rows"], cols)
        + "\n\n"
        + machine_line(data)
    )


def attention(data: dict) -> str:
    cols = [
        ("seq", "seq", "d"),
        ("impl", "path", "s"),
        ("ms", "fwd+bwd ms", ".1f"),
        ("speed_vs_torch", "x torch", ".2f"),
        ("speed_vs_math", "x math", ".2f"),
        ("peak_mib", "peak MiB", ".1f"),
        ("mem_vs_math", "memory / math", ".3f"),
    ]
    rows = data["rows"]
    growth = []
    for impl in dict.fromkeys(r["impl"] for r in rows):
        mine = {r["seq"]: r for r in rows if r["impl"] == impl}
        lo, hi = min(mine), max(mine)
        k = math.log(hi / lo)
        growth.append(
            {
                "impl": impl,
                "seqs": f"{lo} -> {hi}",
                "time": math.log(mine[hi]["ms"] / mine[lo]["ms"]) / k,
                "mem": math.log(mine[hi]["peak_mib"] / mine[lo]["peak_mib"]) / k,
            }
        )
    gcols = [("impl", "path", "s"), ("seqs", "seq", "s"), ("time", "time ~ T^x", ".2f"), ("mem", "memory ~ T^x", ".2f")]
    cfg = data["config"]
    return (
        f"Multi-head attention forward + backward, batch {cfg['batch']}, d_model {cfg['d_model']}, "
        f"{cfg['heads']} heads, ~30% padding, attention dropout {cfg['dropout']:g}; peak = tensor memory "
        f"allocated above the start (torch.profiler).\n\n"
        + markdown(rows, cols)
        + "\n\nGrowth with sequence length (fitted between the shortest and the longest):\n\n"
        + markdown(growth, gcols)
        + "\n\n"
        + machine_line(data)
    )


def compile_(data: dict) -> str:
    cols = [
        ("impl", "path", "s"),
        ("compile_s", "compile s", ".0f"),
        ("eager_ms", "eager ms", ".0f"),
        ("compiled_ms", "compiled ms", ".0f"),
        ("speedup", "speed-up", ".2f"),
        ("break_even_steps", "pays off after (steps)", ".0f"),
    ]
    ok = [r for r in data["rows"] if "error" not in r]
    errors = "".join(f"\n- {r['impl']}: {r['error']}" for r in data["rows"] if "error" in r)
    return markdown(ok, cols) + errors + "\n\n" + machine_line(data)


def allocator(data: dict) -> str:
    cols = [
        ("workload", "workload", "s"),
        ("allocator", "allocator", "s"),
        ("ms", "ms / call", ".0f"),
        ("vs_default", "x glibc default", ".2f"),
        ("faults", "page faults / call", ",.0f"),
    ]
    return markdown(data["rows"], cols) + "\n\n" + machine_line(data)


def accuracy(data: dict) -> str:
    cols = [
        ("dataset", "dataset", "s"),
        ("attention_dropout", "attention dropout", "g"),
        ("precision", "precision", "s"),
        ("seed", "runs", "d"),
        ("test_acc", "test acc", ".4f"),
        ("val_acc_best", "best val acc", ".4f"),
    ]
    extra = " ".join(data["config"]["extra"]) or "none"
    return f"Mean over seeds; extra overrides: `{extra}`.\n\n" + markdown(data["summary"], cols)


def versions(data: dict) -> str:
    cfg, base = data["config"], data["base"]
    cols = [
        ("case", "case", "s"),
        ("base_ms", f"{base} ms", ".1f"),
        ("ours_ms", "this version ms", ".1f"),
        ("ours_vs_base", f"time x {base}", ".2f"),
        ("ours_vs_base_default", f"x {base}'s default", ".2f"),
    ]
    return (
        f"Training step, batch {cfg['batch']} x seq {cfg['seq']}, d_model {cfg['d_model']}, {cfg['num_heads']} "
        f"heads, {cfg['num_layers']} layers, ff {cfg['dim_feedforward']}, AdamW ({cfg['rounds']} interleaved "
        f"rounds, median), both versions in one process.\n\n"
        + markdown(data["rows"], cols)
        + "\n\n"
        + machine_line(data)
    )


def busy_cores(data: dict) -> str:
    rows = [{"condition": name, "median_s": value, "runs": len(data["samples_s"][name])}
            for name, value in data["median_s"].items()]  # fmt: skip
    ratios = "; ".join(f"{name} **{value:.2f}x**" for name, value in data["ratios"].items())
    return (
        f"`{data['command']}`, from launch to exit, on idle cores and with {data['busy']}.\n\n"
        + markdown(rows, [("condition", "condition", "s"), ("median_s", "median s", ".1f"), ("runs", "runs", "d")])
        + f"\n\n{ratios}.\n\n"
        + machine_line(data)
    )


SECTIONS = {
    "train_step": train_step,
    "versions": versions,
    "attention": attention,
    "compile": compile_,
    "allocator": allocator,
    "accuracy": accuracy,
    "busy_cores": busy_cores,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    for name, render in SECTIONS.items():
        for path in sorted(Path(args.results).glob(f"{name}*.json")):
            print(f"<!-- {path.name} -->\n{render(json.loads(path.read_text()))}\n")


if __name__ == "__main__":
    main()
