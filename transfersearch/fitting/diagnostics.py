"""What the engine found worth saying about a fit: typed records, not warnings.

The engine (:func:`transfersearch.fitting.fit_sweep`) returns them on
``Extrapolation.diagnostics``; the public boundary (:func:`transfersearch.extrapolate`) warns once
for each record the user must act on (``act=True``) and logs the rest; ``summary()``, the command
line and the dashboard render the same records.
"""

from __future__ import annotations

from dataclasses import dataclass

from transfersearch.errors import TransferSearchError
from transfersearch.scale import Scale

__all__ = ["KINDS", "Diagnostic"]

#: The kinds of record, and what each one reports.
KINDS: dict[str, str] = {
    "edge": "a rung's optimum past the edge of its trials, read off the valley's shape",
    "bound": "a rung's optimum known only as a bound (a censored observation in the laws)",
    "unvaried": "a parameter no trial varied: dropped from the fit, its one value kept",
    "blown_up": "finite values past diverged_beyond, counted as diverged runs",
    "far": "values far past the rest of their rung: read as runs that blew up (diverged)",
    "unfitted": "parameters params= leaves out that vary among one scale's trials",
    "collinearity": "scale variables the ladder moves together",
    "linear": "a parameter with values <= 0 and no declaration, fitted on a linear axis",
    "crashed": "trials that raised an exception: left out of the fit, not divergences",
    "far_target": "a target far beyond the ladder: the prediction leans on the law's form",
    "dropped": "scales left out because every trial there diverged or crashed",
    "scatter": "as many rungs as the law has coefficients: the scatter is not identified",
    "interaction": "parameter pairs no rung varies together: their valley's tilt is the prior's",
    "wide": "a 90% interval at the target wider than the trials' range: the priors decide",
    "held": "the law's point at the target held at the edge of what the trials support",
    "flat": "scales whose finite trials all report one value: the optimum there from priors",
    "unseen": "a scale variable the target moves along that the ladder does not",
    "boundary": "what is known of divergence: how far the trials stayed stable",
    "unsettled": "the noise fit and the valley cycled instead of settling: a fragile answer",
}


@dataclass(frozen=True)
class Diagnostic:
    """One finding of a fit.

    Attributes:
        kind: one of :data:`KINDS`.
        message: the full sentence shown to the user (warning text, summary line).
        act: True when the user must act on it: the public boundary warns
            (:class:`~transfersearch.errors.TransferSearchWarning`); False: it is logged and
            shown in ``summary()``.
        param: the parameter it concerns, if one.
        scale: the rung it concerns, if one.
    """

    kind: str
    message: str
    act: bool
    param: str | None = None
    scale: Scale | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TransferSearchError(
                f"`kind` must be one of {sorted(KINDS)}, but got kind={self.kind!r}. Pick the "
                "closest kind, or add it to transfersearch.fitting.diagnostics.KINDS."
            )
