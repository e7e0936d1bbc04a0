"""Trial tables on the synthetic ladder (known law) for the CSV and observation tests."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

import transfersearch as ts
from transfersearch import synthetic

TARGET = "width=1024,dataset_size=3.2e5,batch_size=64"
#: Trials per rung of the synthetic table: 4 rungs x 12 = 48 trials, as in the issue's probes.
PER_RUNG = 12


def sweep_rows(seed: int = 0) -> list[dict[str, Any]]:
    """48 trials on the synthetic ladder (known law), as CSV records with our column names."""
    rng = np.random.default_rng(seed)
    rows = []
    for scale in synthetic.LADDER:
        for _ in range(PER_RUNG):
            coords = {
                "base_lr": float(math.exp(rng.uniform(math.log(1e-4), math.log(0.3)))),
                "tau_epoch": float(math.exp(rng.uniform(math.log(0.05), math.log(20.0)))),
            }
            rows.append(
                {
                    **{f"scale.{k}": v for k, v in scale.items()},
                    **{f"params.{k}": v for k, v in coords.items()},
                    "value": 2.0 + synthetic.regret(scale, coords) + float(rng.normal(0, 1e-3)),
                }
            )
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], encoding: str = "utf-8") -> Path:
    with path.open("w", newline="", encoding=encoding) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def observations(rows: list[dict[str, Any]]) -> list[ts.Observation]:
    return [
        ts.Observation(
            scale={k[6:]: v for k, v in r.items() if k.startswith("scale.")},
            params={k[7:]: v for k, v in r.items() if k.startswith("params.")},
            value=r["value"],
        )
        for r in rows
    ]


def negative_rows() -> list[dict[str, Any]]:
    """3 of 48 learning rates negative (rows 5, 17, 40): the issue's silent switch to linear."""
    rows = sweep_rows()
    for i in (5, 17, 40):
        rows[i]["params.base_lr"] = -0.0099
    return rows
