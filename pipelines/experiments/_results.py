"""What every experiment script writes: one CSV per table under ``results/<experiment>/``."""

from __future__ import annotations

import csv
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"


def write_csv(out: Path, name: str, rows: list[dict]) -> Path:
    """Write ``rows`` (dicts with the same keys) to ``out/name`` and say where."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / name, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out / name}", flush=True)
    return out / name
