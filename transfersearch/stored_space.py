"""A :class:`~transfersearch.TransferSpace` as versioned JSON, stored beside the trials.

The Optuna sampler writes it to the study's user attribute :data:`SPACE_ATTR`; the Ray Tune
searcher puts it in the state it saves into the experiment directory (``searcher-state-*.pkl``,
which holds JSON). The framework readers (``transfersearch.integrations``) read it back into their
:class:`~transfersearch.sweep.Sweep` with :func:`space_from_json`; :func:`stored_space` is
``read_sweep(source).space``, so the command line and :func:`transfersearch.extrapolate`'s caller
get the target's concrete hyperparameters without rebuilding the space. Only the built-in rules are stored (a custom rule class is refused rather
than imported by name: reading a study must never run code named in it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

from transfersearch import rules
from transfersearch.errors import TransferSearchError
from transfersearch.optimizers import optimizer_to_dict
from transfersearch.readers import read_sweep
from transfersearch.scale import Scale
from transfersearch.space import Choice, Float, Int, TransferSpace

__all__ = [
    "SPACE_ATTR",
    "SPACE_FORMAT",
    "SPACE_VERSION",
    "space_from_json",
    "space_to_json",
    "storable_space",
    "stored_space",
]

logger = logging.getLogger(__name__)

#: Study user attribute (Optuna) and state key (Ray Tune) holding the space.
SPACE_ATTR = "transfersearch:space"
#: The ``format`` field of the JSON object.
SPACE_FORMAT = "transfersearch.space"
#: The ``version`` field; a reader refuses other versions instead of guessing.
SPACE_VERSION = 1

#: The classes a stored rule may name (built-ins only: no import by name).
_RULE_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        rules.MuP,
        rules.Standard,
        rules.SqrtWidth,
        rules.ConstantTauEpoch,
        rules.PowerLinesTau,
        rules.AdamBatch,
        rules.SGDBatch,
        rules.CompleteP,
    )
}


def _rule_to_json(rule: Any) -> Any:
    """A rule (or a dataset / batch rule, or its string shorthand) as plain JSON."""
    if rule is None or isinstance(rule, (str, bool, int, float)):
        return rule
    name = type(rule).__name__
    if _RULE_CLASSES.get(name) is not type(rule) or not dataclasses.is_dataclass(rule):
        raise TransferSearchError(
            f"cannot store the custom rule {rule!r} as JSON: only the built-in rules "
            f"({', '.join(sorted(_RULE_CLASSES))}) are stored. Pass the space explicitly, e.g. "
            "res.hyperparameters(space)."
        )
    fields = {
        f.name: _rule_to_json(getattr(rule, f.name)) for f in dataclasses.fields(rule) if f.init
    }
    return {"type": name, **fields}


def _rule_from_json(data: Any) -> Any:
    if not isinstance(data, Mapping):
        return data
    cls = _RULE_CLASSES.get(str(data.get("type")))
    if cls is None:
        raise TransferSearchError(
            f"the stored space names an unknown rule {data.get('type')!r}; this version knows "
            f"{sorted(_RULE_CLASSES)}."
        )
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(str(k) for k in data if k != "type" and k not in known)
    if unknown:
        raise TransferSearchError(
            f"the stored rule {cls.__name__} has unknown keywords {unknown}; this version knows "
            f"{sorted(known)}."
        )
    return cls(**{k: _rule_from_json(v) for k, v in data.items() if k != "type"})


def _dist_to_json(value: Any) -> Any:
    if isinstance(value, Float):
        return {"type": "float", "low": value.low, "high": value.high, "log": value.log}
    if isinstance(value, Int):
        return {
            "type": "int",
            "low": value.low,
            "high": value.high,
            "log": value.log,
            "step": value.step,
        }
    if isinstance(value, Choice):
        return {"type": "choice", "choices": list(value.choices)}
    return {"type": "fixed", "value": value}


def _dist_from_json(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise TransferSearchError(
            f"a stored coordinate must be an object with a 'type', but got {data!r:.80}."
        )
    kind = data.get("type")
    if kind == "float":
        return Float(data["low"], data["high"], log=bool(data["log"]))
    if kind == "int":
        return Int(data["low"], data["high"], log=bool(data["log"]), step=data["step"])
    if kind == "choice":
        return Choice(data["choices"])
    if kind == "fixed":
        return data["value"]
    raise TransferSearchError(f"the stored space has a coordinate of unknown type {kind!r}.")


def space_to_json(space: TransferSpace) -> dict[str, Any]:
    """``space`` as a JSON-ready dict: format, version, base, coordinates, rule, optimizer defaults.

    Raises:
        TransferSearchError: the space uses a rule class that is not built in.
    """
    coords = {**space.distributions, **space.fixed}
    return {
        "format": SPACE_FORMAT,
        "version": SPACE_VERSION,
        "base": space.base.to_dict(),
        "coords": {name: _dist_to_json(value) for name, value in coords.items()},
        "rule": _rule_to_json(space.rule),
        "betas": list(space.betas),
        "eps": space.eps,
        "ema_momentum": space.ema_momentum,
        "custom_scale_names": list(space.custom_scale_names),
        **(
            {"optimizers": {g: optimizer_to_dict(o) for g, o in space.optimizers.items()}}
            if space.optimizers
            else {}
        ),
    }


def storable_space(space: TransferSpace) -> dict[str, Any] | None:
    """:func:`space_to_json`, or None (logged) for a space whose rule cannot be stored."""
    try:
        return space_to_json(space)
    except TransferSearchError as exc:
        logger.info("the space is not stored with the trials: %s", exc)
        return None


def space_from_json(data: Mapping[str, Any] | str) -> TransferSpace:
    """The space :func:`space_to_json` wrote (a dict, or its JSON text).

    Raises:
        TransferSearchError: not a stored space, another version, an unknown rule or rule
            keyword, a missing field, or a malformed base, coordinate or rule.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise TransferSearchError(f"the stored space is not valid JSON ({exc}).") from None
        except RecursionError:
            raise TransferSearchError(
                "the stored space is nested too deeply to read; it is not a stored space."
            ) from None
    if not isinstance(data, Mapping) or data.get("format") != SPACE_FORMAT:
        raise TransferSearchError(
            f"not a stored TransferSpace (expected format={SPACE_FORMAT!r}), got {data!r:.120}."
        )
    if data.get("version") != SPACE_VERSION:
        raise TransferSearchError(
            f"the stored space has version={data.get('version')!r}; this version of "
            f"transfersearch reads version={SPACE_VERSION}. Upgrade transfersearch, or pass the "
            "space explicitly."
        )
    try:
        return _space(data)
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
        # a hand-edited or damaged attribute: one error naming what is wrong, not a traceback
        logger.debug("the stored space cannot be built", exc_info=True)
        what = f"it lacks the field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise TransferSearchError(
            f"the stored space is malformed: {what}. Repair or delete the study's user "
            f"attribute {SPACE_ATTR!r} (TransferSampler writes it again), or pass the space "
            "explicitly, e.g. res.hyperparameters(space)."
        ) from None


#: The fields of a stored space (``format`` and ``version`` are checked first).
_FIELDS = ("base", "coords", "rule", "betas", "eps", "ema_momentum", "custom_scale_names")


def _space(data: Mapping[str, Any]) -> TransferSpace:
    """The space from a stored dict whose format and version are checked; raises a builtin
    error (TypeError, KeyError, ...) or TransferSearchError on a malformed one."""
    missing = [name for name in _FIELDS if name not in data]
    if missing:
        raise KeyError(", ".join(missing))
    coords = data["coords"]
    if not isinstance(coords, Mapping):
        raise TypeError(f"'coords' must map coordinate -> distribution, but got {coords!r:.80}")
    betas = data["betas"]
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise TypeError(f"'betas' must be a pair, but got {betas!r:.80}")
    return TransferSpace(
        base=Scale(data["base"]),
        coords={name: _dist_from_json(value) for name, value in coords.items()},
        rule=_rule_from_json(data["rule"]),
        betas=(float(betas[0]), float(betas[1])),
        eps=data["eps"],
        ema_momentum=data["ema_momentum"],
        custom_scale_names=tuple(data["custom_scale_names"]),
        optimizers=data.get("optimizers"),  # dicts: Hyperparameters' check reads them back
    )


def stored_space(source: Any) -> TransferSpace | None:
    """The space stored with ``source``, or None when it holds none: ``read_sweep(source).space``.

    Args:
        source: an Optuna study run with ``TransferSampler`` (user attribute :data:`SPACE_ATTR`),
            a Ray Tune ``ResultGrid`` or experiment directory run with ``TransferSearch`` (the
            searcher state Tune saved there, read as JSON), or any other source
            :func:`~transfersearch.readers.read_sweep` reads (None).

    Raises:
        TransferSearchError: a space is stored but cannot be read (another version, an unknown
            rule, a malformed field), or ``source`` is no source of trials.
    """
    return read_sweep(source).space
