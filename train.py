"""`python train.py k=v ...`: train a Transformer classifier (Hydra entry point)."""

import os
from pathlib import Path

import hydra

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))  # outputs/ in the repo, from any cwd
from transformer_attention import cli  # noqa: E402  (no torch yet: the config is checked first)


@hydra.main(config_path="conf", config_name="train", version_base="1.3")
def main(cfg):
    return cli.run("train", cfg)


if __name__ == "__main__":
    cli.start("train", main)  # an override Hydra cannot read or compose: one line naming it and the fix
