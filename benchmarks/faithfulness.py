"""The analyses' results of evaluate.py runs, as the guide's tables: each method's comprehensiveness, sufficiency
and AOPC, and the heads' importance, read from `<run>/analysis/*.json`.

    python evaluate.py ckpt_path=<toy run>/checkpoints/last.ckpt 'analyses=[heads,faithfulness]' analysis.samples=400
    python benchmarks/faithfulness.py toy=outputs/evaluate/runs/<time> [rotten_tomatoes=...] \\
        [--json benchmarks/results/faithfulness.json]

Each `name=folder` is one evaluate.py run; the JSON keeps its command (from `.hydra/overrides.yaml`), its
settings and every score with its standard error, so earlier rows of names not given are kept.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml
from common import ROOT, write_json

MEASURES = ("comprehensiveness", "sufficiency", "aopc", "naopc", "tau_leave_one_out", "tau_integrated_gradients")
MEASURES += ("auprc", "token_f1", "eraser_comprehensiveness", "eraser_sufficiency")  # plausibility: known words
HEADS = ("comprehensiveness ↑", "sufficiency ↓", "AOPC", "nAOPC ↑", "tau LOO", "tau IG", "AUPRC ↑", "token F1 ↑")
HEADS += ("ERASER compr. ↑", "ERASER suff. ↓")


def read_run(folder: Path) -> dict:
    """One evaluate.py run's analysis: its command, settings, faithfulness scores and head importance."""
    overrides = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
    faith = json.loads((folder / "analysis" / "faithfulness.json").read_text())
    heads_file = folder / "analysis" / "heads.json"
    heads = json.loads(heads_file.read_text()) if heads_file.is_file() else None
    metrics = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").is_file() else {}
    return {
        "folder": str(folder),
        "command": "python evaluate.py " + " ".join(o for o in overrides if not o.startswith("paths.log_dir=")),
        "test_acc": metrics.get("test/acc"),
        "split": faith["split"],
        "texts": faith["texts"],
        "naopc_texts": faith.get("naopc_texts"),
        "plausibility_texts": faith.get("plausibility_texts"),
        "removal": faith["removal_means"],
        "k": faith["k"],
        "ig_completeness_error": faith["integrated_gradients_completeness_error"],
        "seconds": faith.get("seconds"),
        "scores": {m: {q: s.get(q) for q in (*MEASURES, "seconds_per_text")} for m, s in faith["scores"].items()},
        "sem": {m: {q: s.get(q) for q in MEASURES} for m, s in faith["sem"].items()},
        "heads": None
        if heads is None
        else {
            key: heads[key]
            for key in ("rows", "accuracy", "loss", "accuracy_drop", "loss_increase", "gradient", "seconds")
        }
        | {"spearman": heads["spearman_gradient_vs_masking"], "pruning": heads["pruning"]},
    }


def table(run: dict) -> str:
    """The guide's table: one row per method, best nAOPC first, each score with its standard error; a tau of 1 on
    every text says "identical"."""
    shown = [i for i, q in enumerate(MEASURES) if any(run["scores"][m][q] is not None for m in run["scores"])]
    head = [HEADS[i] for i in shown] + ["s / text"]
    lines = ["| method | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for method in sorted(run["scores"], key=lambda m: -(run["scores"][m]["naopc"] or 0.0)):
        cells = []
        for q in (MEASURES[i] for i in shown):
            mean, sem = run["scores"][method][q], run["sem"][method][q]
            identical = q.startswith("tau") and mean is not None and mean > 1 - 1e-9 and sem < 1e-9
            cells.append("-" if mean is None else "1 (identical)" if identical else f"{mean:.3f} ± {sem:.3f}")
        seconds = run["scores"][method].get("seconds_per_text")
        cells.append("-" if seconds is None else f"{seconds:.3g}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="name=<evaluate.py run folder>")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "faithfulness.json")
    args = parser.parse_args()
    kept = json.loads(args.json.read_text())["runs"] if args.json.is_file() else {}
    for item in args.runs:
        name, _, folder = item.partition("=")
        kept[name] = run = read_run(Path(folder))
        print(f"\n{name}: {run['texts']} {run['split']} texts, words {run['removal']} ({run['command']})")
        print(table(run))
        if run["heads"]:
            h = run["heads"]
            print(f"heads: accuracy {h['accuracy']:.3f} on {h['rows']} validation rows; Spearman {h['spearman']:.2f}")
    write_json(args.json, {"runs": kept})


if __name__ == "__main__":
    main()
