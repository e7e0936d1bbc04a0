"""A sampler's TransferSpace on its Optuna study (user attribute, versioned JSON): written by
the sampler, read back by the study's reader; and its ladder, which a later session must keep
(trials store their rung by index)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from transfersearch.errors import TransferSearchError
from transfersearch.stored_space import SPACE_ATTR, space_from_json, storable_space

if TYPE_CHECKING:
    from collections.abc import Sequence

    from optuna.study import Study

    from transfersearch.scale import Scale
    from transfersearch.space import TransferSpace

#: The study's user attribute holding the sampler's ladder (a list of scales, cost order).
LADDER_ATTR = "transfersearch:ladder"

logger = logging.getLogger("transfersearch.integrations.optuna")


def record_space(study: Study, space: TransferSpace) -> bool:
    """Write ``space`` to ``study``'s user attribute :data:`SPACE_ATTR` unless it is already there.

    A space with a custom rule class cannot be stored (see :mod:`transfersearch.stored_space`):
    that is logged, and the caller must then pass the space to ``res.hyperparameters(space)``.

    Returns:
        True when the study holds this space afterwards.
    """
    data = storable_space(space)
    if data is None:
        return False
    if study.user_attrs.get(SPACE_ATTR) != data:
        study.set_user_attr(SPACE_ATTR, data)
        logger.info("study %r: stored the TransferSpace as %r", study.study_name, SPACE_ATTR)
    return True


def study_space(study: Study) -> TransferSpace | None:
    """The space stored on ``study`` (user attribute :data:`SPACE_ATTR`), or None.

    Raises:
        TransferSearchError: a space is stored but cannot be read (another version, an unknown
            rule, a malformed field, or an attribute nested too deeply to decode).
    """
    try:
        raw = study.user_attrs.get(SPACE_ATTR)
    except RecursionError:  # a storage decoding a deeply nested JSON attribute
        raise TransferSearchError(
            "the study's user attributes are nested too deeply to read. Repair or delete the "
            f"attribute {SPACE_ATTR!r}."
        ) from None
    return None if raw is None else space_from_json(raw)


def record_ladder(study: Study, ladder: Sequence[Scale]) -> None:
    """Write the sampler's ladder to ``study`` (user attribute :data:`LADDER_ATTR`), or check it
    against the one a previous session wrote.

    Trials store their rung by index, so a later session must keep every stored rung where it
    was: the same ladder, or rungs added after the stored ones (costlier). A rung added
    before them would shift the indices, and the sampler would read one rung's trials as
    another's.

    Raises:
        TransferSearchError: the stored ladder is not a prefix of ``ladder``.
    """
    current = [dict(scale.items()) for scale in ladder]
    stored = study.user_attrs.get(LADDER_ATTR)
    if stored is not None and current[: len(stored)] != stored:
        raise TransferSearchError(
            f"study {study.study_name!r} was run on the ladder {stored}, and its trials store "
            f"their rung by index; this sampler's ladder is {current}. Resume with the stored "
            "ladder (costlier rungs may be added after it), or start a new study for the new "
            "ladder."
        )
    if stored != current:
        study.set_user_attr(LADDER_ATTR, current)
