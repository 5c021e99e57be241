"""`python predict.py ckpt_path=... text="..."`: classify sentences with a checkpoint (Hydra entry point)."""

import os
from pathlib import Path

import hydra

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("PROJECT_ROOT", str(ROOT))  # outputs/ lands under the repo, whatever the cwd

from transformer_attention.predict import main  # noqa: E402

if __name__ == "__main__":
    hydra.main(config_path=str(ROOT / "conf"), config_name="predict", version_base="1.3")(main)()
