"""The resolvers conf/ uses: `${resume_dir:ckpt,default}` and `${resume_subdir:ckpt,resumed,default}` (train.yaml's
`hydra.run`: a run resumed from `<run>/checkpoints/*.ckpt` goes on in `<run>`), and `${job_name:num,overrides}`
(`hydra.sweep.subdir`: a sweep job's folder named by what it tried)."""

from __future__ import annotations

import re
from typing import Any

from omegaconf import OmegaConf

from ..files import run_dir_of


def resume_dir(ckpt_path: Any, default: str) -> str:
    run = run_dir_of(ckpt_path)
    return str(run) if run else default


def resume_subdir(ckpt_path: Any, resumed: str, default: str) -> str:
    return resumed if run_dir_of(ckpt_path) else default


NAME_SKIPS = ("hydra", "hparams_search", "paths", "ckpt_path", "data.path", "data.data_files", "trainer.devices")


def job_name(num: Any, overrides: Any) -> str:
    """A sweep job's folder (and so its TensorBoard run) named by its number and what it overrides, e.g.
    `1_model.num_heads=2,model.lr=0.001`. The number keeps names unique; paths, devices and the sweep's own
    settings are left out; at most 100 characters."""
    parts = [str(o) for o in overrides or [] if not str(o).lstrip("+~").startswith(NAME_SKIPS)]
    name = ",".join(re.sub(r"[^A-Za-z0-9_.,=+\-]+", "-", p) for p in parts)
    return f"{num}_{name}"[:100] if name else str(num)


def register_resolvers() -> None:
    """Make the resolvers above known to OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver("resume_dir", resume_dir, replace=True)
    OmegaConf.register_new_resolver("resume_subdir", resume_subdir, replace=True)
    OmegaConf.register_new_resolver("job_name", job_name, replace=True)
