"""`RunFolderCheck`: a new run never writes into a folder that holds another run's files, and claims its folder
before anything is written there. A Hydra callback (conf/hydra/default.yaml): it runs before Hydra makes the folder
and writes its `.hydra/` config and log there, which happens before any task code runs.

- `hydra.run.dir` (or a sweep's `hydra.sweep.dir`, `paths.log_dir`, `paths.cache_dir`) that is a file: refused.
- a run folder that already holds files: refused, unless this run resumes a checkpoint of that very folder
  (`python train.py ckpt_path=<run>/checkpoints/last.ckpt`, which goes on in `<run>`; train.py and pretrain.py)
  or is a DDP rank that Lightning started in rank 0's folder;
- a run folder another live run holds (two runs started into one folder at once, a resume of a running run):
  refused, having written nothing (cli/rundir.py's `claim_run_dir`);
- a grid sweep's folder that holds another sweep (its `multirun.yaml`), or that another sweep holds now: refused;
  an Optuna study's folder is where a stopped study resumes, so it is let through (its study lock keeps a second
  launch out).

A refusal is one line, `<kind>: ...`, naming the folder and the fix, and the exit status is 1.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..errors import UserError
from ..files import resumed_in_place
from .rundir import claim_run_dir, is_rank_zero

RESUMABLE = ("train", "pretrain")  # the entry points whose runs resume in their own folder (hydra.job.name)


class RunFolderCheck(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not is_rank_zero():
            return  # a DDP rank Lightning starts runs the command again, in rank 0's folder: its own run
        _refuse_files(config, run_key="hydra.run.dir")
        run_dir = Path(str(config.hydra.run.dir))
        resumable = config.hydra.job.name in RESUMABLE
        resumes = resumable and resumed_in_place(config.get("ckpt_path"), run_dir)
        _claim(run_dir, fresh=not resumes, resume_hint=resumable)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_files(config, run_key="hydra.sweep.dir")
        sweep = Path(str(config.hydra.sweep.dir))
        if str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith("OptunaSweeper"):
            return
        if not (sweep / "multirun.yaml").is_file():
            _claim(sweep)  # before the sweep's multirun.yaml and jobs: a second sweep into it is refused
        if (sweep / "multirun.yaml").is_file():  # another sweep's, there before or written before the lock
            raise SystemExit(
                f"config error: hydra.sweep.dir={sweep} holds another sweep (its multirun.yaml): a new sweep never "
                "writes over its jobs; leave hydra.sweep.dir unset (a new folder under outputs/) or pick another one"
            )


def _claim(folder: Path, fresh: bool = False, resume_hint: bool = False) -> None:
    """`claim_run_dir`, its refusal one line on stderr and exit status 1."""
    try:
        claim_run_dir(folder, fresh=fresh, resume_hint=resume_hint)
    except UserError as err:
        raise SystemExit(f"{err.kind}: {err}") from None


def _refuse_files(config: DictConfig, run_key: str) -> None:
    """A folder setting that names an existing file, or a folder this process cannot write (a read-only disk, no
    permission): refused before anything is made under it, naming the setting and a folder that can be written."""
    caches = () if config.hydra.job.name == "predict" else ("paths.cache_dir",)  # predict.py caches nothing
    for key in ("paths.log_dir", *caches, run_key):
        value = OmegaConf.select(config, key, default=None)
        if value is not None and Path(str(value)).is_file():
            raise SystemExit(f"config error: {key}={value} is a file, not a folder: give a folder there")
        if value is not None and (why := unwritable(Path(str(value)))):
            name = Path(str(value)).name + (time.strftime("-%Y%m%d-%H%M%S") if key == run_key else "")  # a new one
            instead = Path(tempfile.gettempdir()) / "transformer-attention" / name
            raise SystemExit(
                f"disk error: {key}={value} cannot be written ({why}): give a folder that can, e.g. {key}={instead}"
            )


def unwritable(folder: Path) -> str | None:
    """Why this process cannot make or write `folder` (None when it can): read-only, or no permission."""
    existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
    if not existing.is_dir() or os.access(existing, os.W_OK | os.X_OK):
        return None
    read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
    return f"{existing} is on a read-only file system" if read_only else f"no permission to write in {existing}"
