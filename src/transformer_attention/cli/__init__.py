"""The entry shell, torch-free: `run(task, cfg)` checks a config, locks the run folder, prints the config tree
and dispatches to a task (run.py); the config's schema and value rules (config.py), its resolvers
(resolvers.py), run folders (rundir.py), the tree (tree.py).

Importing this package registers the resolvers and the model schema conf/ uses. On import, and only here,
because every process that composes conf/ must have them before it composes: the entry scripts, and a
launcher's worker processes (joblib, submitit), which import this package when they unpickle the task."""

from .config import register_schemas
from .console import check_command_line
from .resolvers import register_resolvers
from .run import run

__all__ = ["check_command_line", "run"]

register_resolvers()
register_schemas()
