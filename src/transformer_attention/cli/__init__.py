"""The entry shell, torch-free: `start(task, main)` (entry.py), `run(task, cfg)` (run.py). Importing it registers
what conf/ uses, as every process that composes conf/ must first: the entry scripts, a launcher's workers."""

from .config import register
from .entry import start
from .run import run

__all__ = ["run", "start"]

register()
