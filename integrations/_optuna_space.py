"""A sampler's TransferSpace on its Optuna study (user attribute, versioned JSON): written by
the sampler, read back by the study's reader."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from transfersearch.errors import TransferSearchError
from transfersearch.stored_space import SPACE_ATTR, space_from_json, storable_space

if TYPE_CHECKING:
    from optuna.study import Study

    from transfersearch.space import TransferSpace

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
