"""Runs that meet in one folder. Of N runs started into one new folder at once, exactly one runs and the others are
refused in one line having written nothing there: every file the winner wrote (sha256, `.hydra/` included) is as
it left it. The same for two sweeps into one sweep folder, and for evaluate.py and predict.py started beside a
training into its folder. Real processes, started together: the race is between them (each test about 10 to 30 s,
one training at most)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TINY, entry_env
from test_checkpoint import save_like_lightning, tiny_module

# the run each racer tries: a tiny training, small enough that the race, not the training, is what takes time
FAST = [*TINY, "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "callbacks.attention_maps=null",
        "callbacks.model_analysis=null"]  # fmt: skip

# an entry point whose files, when the process ends, are recorded (sha256 of every file of `folder`) in `record`:
# registered before the entry point runs, so it runs last, after the run let go of its folder
RECORDED = """
import atexit, hashlib, json, runpy, sys
from pathlib import Path
folder, record, script = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

def hashes():
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    digests = {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    record.write_text(json.dumps(digests))

atexit.register(hashes)
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
"""


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def race(folder: Path, tmp_path: Path, commands: list[list[str]]) -> list[tuple[subprocess.CompletedProcess, dict]]:
    """Start every command (`[script, *overrides]`) at once, each recording `folder`'s files as it ends; wait for
    all. Returns (the process, its record) per command, in order."""
    wrapper = tmp_path / "recorded.py"
    wrapper.write_text(RECORDED)
    records = [tmp_path / f"record_{i}.json" for i in range(len(commands))]
    procs = [
        subprocess.Popen(
            [sys.executable, str(wrapper), str(folder), str(record), str(ROOT / script), *args],
            cwd=tmp_path,
            env=entry_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for record, (script, *args) in zip(records, commands, strict=True)
    ]
    done = []
    for proc, record in zip(procs, records, strict=True):
        out, err = proc.communicate(timeout=300)
        done.append((subprocess.CompletedProcess(proc.args, proc.returncode, out, err), json.loads(record.read_text())))
    return done


REFUSED = ("checkpoint error: ", "config error: ")  # how a refused entry point's one line starts


def check_one_ran(folder: Path, done: list[tuple[subprocess.CompletedProcess, dict]], won: str | None = None) -> int:
    """Exactly one process won (exited 0, or printed `won`) and every other was refused (exit status 1, no traceback)
    in one line naming the folder, whatever warnings a loaded machine adds around it; the folder holds what the
    winner left in it, byte for byte. Returns the winner's index."""
    winners = [i for i, (p, _) in enumerate(done) if (won in p.stdout + p.stderr if won else p.returncode == 0)]
    assert len(winners) == 1, [(p.returncode, p.stderr[-500:]) for p, _ in done]
    for i, (proc, _) in enumerate(done):
        if i == winners[0]:
            continue
        refusals = [line for line in proc.stderr.splitlines() if line.startswith(REFUSED)]
        assert proc.returncode == 1 and len(refusals) == 1, proc.stderr[-3000:]
        assert str(folder) in refusals[0] and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert digests(folder) == done[winners[0]][1]  # nothing the others did changed, added or removed a file
    return winners[0]


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3])  # more racers than the 2 cores would race the machine, not the folder
def test_of_n_trainings_started_into_one_new_folder_one_runs_and_keeps_its_files(tmp_path: Path, n: int):
    folder = tmp_path / "run"
    log_dir = f"paths.log_dir={tmp_path / 'outputs'}"
    commands = [["train.py", *FAST, f"seed={i}", f"hydra.run.dir={folder}", log_dir] for i in range(n)]
    done = race(folder, tmp_path, commands)
    winner = check_one_ran(folder, done)
    overrides = (folder / ".hydra" / "overrides.yaml").read_text()
    assert f"seed={winner}\n" in overrides  # the winner's own config, not a refused run's
    assert sum(f"seed={i}\n" in overrides for i in range(n)) == 1
    for name in ("config.yaml", "hydra.yaml"):
        assert (folder / ".hydra" / name).is_file()
    assert (folder / "train.log").is_file() and (folder / "checkpoints" / "last.ckpt").is_file()


def test_two_sweeps_into_one_sweep_folder_one_runs(tmp_path: Path):
    """Jobs that fail their config check, so that the sweeps are quick: the winner's jobs run (and fail, named at its
    end), the other sweep is refused before its multirun.yaml or any job."""
    folder = tmp_path / "sweep"
    tiny = [o for o in TINY if not o.startswith("model.num_heads")]
    sweep = ["train.py", "-m", "model.num_heads=3,5", *tiny, f"hydra.sweep.dir={folder}"]
    done = race(folder, tmp_path, [[*sweep, f"paths.log_dir={tmp_path / name}"] for name in ("a", "b")])
    winner = check_one_ran(folder, done, won="2 of 2 jobs failed")
    assert done[winner][0].returncode == 1
    assert len(list(folder.glob("*/failed.json"))) == 2 and (folder / "multirun.yaml").is_file()


@pytest.mark.slow
def test_evaluate_and_predict_started_beside_a_training_into_its_folder_are_refused_or_run_alone(tmp_path: Path):
    ckpt = save_like_lightning(tiny_module(), tmp_path / "model.ckpt")
    folder = tmp_path / "run"
    shared = [f"hydra.run.dir={folder}", f"paths.log_dir={tmp_path / 'outputs'}"]
    commands = [
        ["train.py", *FAST, *shared],
        ["evaluate.py", f"ckpt_path={ckpt}", "data.toy_size=400", *shared],
        ["predict.py", f"ckpt_path={ckpt}", "text=a fine film", *shared],
    ]
    done = race(folder, tmp_path, commands)
    winner = check_one_ran(folder, done)
    log = {0: "train.log", 1: "evaluate.log", 2: "predict.log"}
    assert [p.name for p in folder.glob("*.log") if p.name in log.values()] == [log[winner]]
