"""`RunFolderCheck`: a new run never writes into a folder that holds another run's files. A Hydra callback
(conf/hydra/default.yaml): it looks before Hydra makes the folder and writes its `.hydra/` config and log
there, which happens before any task code runs.

- `hydra.run.dir` (or a sweep's `hydra.sweep.dir`, `paths.log_dir`, `paths.cache_dir`) that is a file: refused.
- a run folder that already holds files: refused, unless this run resumes a checkpoint of that very folder
  (`python train.py ckpt_path=<run>/checkpoints/last.ckpt`, which goes on in `<run>`; train.py and pretrain.py)
  or is a DDP rank that Lightning started in rank 0's folder;
- a grid sweep's folder that holds another sweep (its `multirun.yaml`): refused; an Optuna study's folder is
  where a stopped study resumes, so it is let through.

A refusal is one line, `config error: ...`, naming the folder and the fix, and the exit status is 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..files import resumed_in_place
from .rundir import is_rank_zero

RESUMABLE = ("train", "pretrain")  # the entry points whose runs resume in their own folder (hydra.job.name)


class RunFolderCheck(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not is_rank_zero():
            return  # a DDP rank Lightning starts runs the command again, in rank 0's folder: its own run
        _refuse_files(config, run_key="hydra.run.dir")
        run_dir = Path(str(config.hydra.run.dir))
        resumes = config.hydra.job.name in RESUMABLE and resumed_in_place(config.get("ckpt_path"), run_dir)
        if run_dir.is_dir() and any(run_dir.iterdir()) and not resumes:
            raise SystemExit(f"config error: {taken_message(run_dir, config.hydra.job.name)}")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_files(config, run_key="hydra.sweep.dir")
        sweep = Path(str(config.hydra.sweep.dir))
        optuna = str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith("OptunaSweeper")
        if (sweep / "multirun.yaml").is_file() and not optuna:
            raise SystemExit(
                f"config error: hydra.sweep.dir={sweep} holds another sweep (its multirun.yaml): a new sweep never "
                "writes over its jobs; leave hydra.sweep.dir unset (a new folder under outputs/) or pick another one"
            )


def taken_message(run_dir: Path, job: str) -> str:
    """Why a new run may not write into `run_dir`, and what to do instead."""
    held = sorted(p.name for p in run_dir.iterdir())[:4]
    last = run_dir / "checkpoints" / "last.ckpt"
    resume = f", or resume that run: ckpt_path={last}" if job in RESUMABLE and last.is_file() else ""
    return (
        f"run folder {run_dir} holds another run's files ({', '.join(held)}, ...): a new run never writes into it; "
        f"leave hydra.run.dir unset (a new folder under outputs/), pick an empty folder{resume}"
    )


def _refuse_files(config: DictConfig, run_key: str) -> None:
    """A folder setting that names an existing file: refused before anything is made under it."""
    for key in (run_key, "paths.log_dir", "paths.cache_dir"):
        value = OmegaConf.select(config, key, default=None)
        if value is not None and Path(str(value)).is_file():
            raise SystemExit(f"config error: {key}={value} is a file, not a folder: give a folder there")
