"""A law model for tests that pass their own family (``models=``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from transfersearch.fitting.laws import LawData, LawFit


@dataclass(frozen=True)
class Pinned:
    """Every parameter's optimum is 0.05 at every scale; applies only where ``only`` says (None:
    every parameter)."""

    name: str = "pinned"
    drift: bool = True
    only: str | None = None

    def applies(self, data: LawData) -> bool:
        return self.only is None or data.param == self.only

    def fit(self, data: LawData, target_logs: np.ndarray) -> LawFit:
        return LawFit(
            intercept=math.log(0.05),
            exponents=np.zeros(len(data.variables)),
            fitted=(),
            covariance=np.array([[1e-4]]),
            scatter_var=0.0,
            prior_sd=0.0,
        )
