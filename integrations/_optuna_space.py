"""Store a sampler's TransferSpace on its Optuna study (user attribute, versioned JSON)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from transfersearch.stored_space import SPACE_ATTR, storable_space

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
