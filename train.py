"""`python train.py k=v ...`: train a Transformer classifier (Hydra entry point)."""

import os
from pathlib import Path

import hydra

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("PROJECT_ROOT", str(ROOT))  # outputs/ lands under the repo, whatever the cwd

import transformer_attention.runs  # noqa: E402, F401  (registers the resolvers conf/train.yaml's hydra.run uses)


def task(cfg):
    """Check the config's values first, before torch and Lightning are imported, then train."""
    from transformer_attention.config import check_values_or_exit

    check_values_or_exit(cfg)
    from transformer_attention.train import main

    return main(cfg)


if __name__ == "__main__":
    hydra.main(config_path=str(ROOT / "conf"), config_name="train", version_base="1.3")(task)()
