"""A read-only dict: what the public results hold their mappings in.

A ``dict`` subclass, so that ``json.dumps``, ``dict(...)``, pickling and ``copy`` take it as the
dict it is (``types.MappingProxyType`` is refused by ``json.dumps``); every mutating method
raises ``TypeError``, as a ``mappingproxy`` does.
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

__all__ = ["FrozenDict"]

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """A ``dict`` that refuses changes (``TypeError``); ``json.dumps`` writes it as a dict."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} is read-only; copy it with dict(...) to change a value."
        )

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict[K, V]:
        import copy

        return type(self)({k: copy.deepcopy(v, memo) for k, v in self.items()})
