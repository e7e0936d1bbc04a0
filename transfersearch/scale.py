"""Scale: the named positive quantities that describe one training run's size."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from typing import Any

from transfersearch.errors import TransferSearchError, check_positive

__all__ = ["KNOWN_SCALE_NAMES", "Scale", "whole_number"]

#: Names transfersearch understands. Users may add their own names as well.
#:
#: - ``width``: fan-in of the hidden matrices (d in the papers).
#: - ``depth``: number of blocks / layers.
#: - ``dataset_size``: training-set size N, in samples or tokens: the same unit as ``batch_size``.
#: - ``batch_size``: B, in the unit of ``dataset_size``.
#: - ``epochs``: passes over the dataset.
#: - ``steps``: total optimizer steps (iterations) T.
#: - ``tokens``: training tokens D (used by the Power Lines prior, tokens per parameter).
#: - ``params``: model parameters (used by the Power Lines prior).
KNOWN_SCALE_NAMES: tuple[str, ...] = (
    "width",
    "depth",
    "dataset_size",
    "batch_size",
    "epochs",
    "steps",
    "tokens",
    "params",
)


#: Largest whole number returned as an ``int``: every integer up to 2**53 is exact in a float,
#: so the conversion never changes the value.
_EXACT_INTEGERS = 2**53


def whole_number(value: float) -> float:
    """``value`` as an ``int`` when it is a whole number, else as it is.

    Sizes and counts (a width, a batch size, a number of steps) are used as ``int`` by the code
    that builds the model, the data loader or the schedule (``nn.Linear(width, ...)``,
    ``DataLoader(batch_size=...)``), which refuse ``32.0``; so a whole number read from a CSV
    (``64.0``) or computed (``epochs × N / B = 16.0``) comes back as ``64`` / ``16``. The value is
    unchanged (``64 == 64.0``, same hash).
    """
    if float(value).is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    return value


class Scale(Mapping[str, float]):
    """An immutable mapping of named positive numbers describing a run's size.

    ``Scale(width=1024, dataset_size=2e5, batch_size=512)``. Values must be finite and > 0; a
    whole number comes back as an ``int`` (``Scale(width=32)["width"]`` is ``32``, also for
    ``width=32.0``), any other as a ``float`` (:func:`whole_number`).
    Derived quantities: :attr:`iters_per_epoch` = N / B (M in Wang & Aitchison Eq. 10) and
    :attr:`total_steps` (``steps`` if given, else ``epochs`` × N / B).

    Raises:
        TransferSearchError: a value is not a number, NaN, infinite, zero or negative, or a name is
            not a non-empty string.
    """

    __slots__ = ("_hash", "_values")

    def __init__(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        merged: dict[str, Any] = {}
        if values is not None:
            if isinstance(values, Scale):
                merged.update(values._values)
            elif isinstance(values, Mapping):
                merged.update(values)
            else:
                raise TransferSearchError(
                    f"Scale() takes a mapping of name -> positive number, but got {values!r}. "
                    "Write Scale(width=256, dataset_size=5e4) or Scale({'width': 256})."
                )
        merged.update(named)
        checked: dict[str, float] = {}
        for name, value in merged.items():
            if not isinstance(name, str) or not name:
                raise TransferSearchError(
                    f"Scale names must be non-empty strings, but got {name!r}. Write e.g. "
                    "Scale(width=256) or Scale({'width': 256})."
                )
            checked[name] = whole_number(
                check_positive(
                    f"scale.{name}", value, fix="Scale values are sizes: give a positive number."
                )
            )
        self._values: dict[str, float] = dict(sorted(checked.items()))
        self._hash = hash(tuple(self._values.items()))

    # Mapping protocol -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"this Scale has no {name!r}; it has {sorted(self._values)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Scale):
            return self._values == other._values
        if isinstance(other, Mapping):
            return self._values == {k: float(v) for k, v in other.items()}
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_fmt(v)}" for k, v in self._values.items())
        return f"Scale({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Scale, (dict(self._values),))

    # Helpers ------------------------------------------------------------------------------------
    def require(self, *names: str, purpose: str = "") -> None:
        """Raise TransferSearchError unless every name is present."""
        missing = [n for n in names if n not in self._values]
        if missing:
            why = f" to {purpose}" if purpose else ""
            extra = [n for n in self._values if n not in names]
            hints = [
                f"{close[0]!r} -> did you mean {name!r}?"
                for name in missing
                if (close := difflib.get_close_matches(name, extra, n=1))
            ]
            raise TransferSearchError(
                f"{self!r} lacks {missing}"
                + (f" ({'; '.join(hints)})" if hints else "")
                + f", needed{why}. Add "
                + ", ".join(f"{n}=..." for n in missing)
                + " to the Scale."
            )

    def replace(self, **named: Any) -> Scale:
        """A copy with some values replaced or added."""
        return Scale(self._values, **named)

    def ratio(self, base: Scale, name: str) -> float:
        """``self[name] / base[name]`` or 1.0 when either scale lacks ``name``."""
        if name in self._values and name in base._values:
            return self._values[name] / base._values[name]
        return 1.0

    def to_dict(self) -> dict[str, float]:
        """A plain ``dict`` (JSON-friendly)."""
        return dict(self._values)

    @property
    def iters_per_epoch(self) -> float | None:
        """M = N / B, iterations per epoch (Wang & Aitchison Eq. 10), or None if N or B is missing."""
        if "dataset_size" in self._values and "batch_size" in self._values:
            return self._values["dataset_size"] / self._values["batch_size"]
        return None

    @property
    def total_steps(self) -> float | None:
        """T: ``steps`` if given, else ``epochs`` × N / B (an ``int`` when whole), else None."""
        if "steps" in self._values:
            return self._values["steps"]
        m = self.iters_per_epoch
        if m is not None and "epochs" in self._values:
            return whole_number(self._values["epochs"] * m)
        return None

    def distance_decades(self, other: Scale, names: Iterator[str] | None = None) -> float:
        """Euclidean distance in log10 units over the names both scales share."""
        shared = [n for n in (names or self._values) if n in other._values]
        return math.sqrt(sum(math.log10(self._values[n] / other._values[n]) ** 2 for n in shared))


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
