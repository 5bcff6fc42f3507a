"""Results remembered within a process, by the settings they were computed with and a key.

`review` judges hundreds of files per call, and a repository's files often describe the same
run (copies per cluster, a few configs in rotation): the layout search and the memory estimates
are pure functions of what the file says (Manifest.content) and of the policy settings, so each
is computed once per call. Bounded: a batch of distinct files never grows the process."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


_ALL: list[PerSettings[Any]] = []


def forget() -> None:
    """Clear every store (tests that compare a path with and without what is remembered)."""
    for store in _ALL:
        store._stores.clear()


class PerSettings(Generic[T]):
    def __init__(self, limit: int = 256) -> None:
        _ALL.append(self)
        self._limit = limit
        # by id(settings), with the settings kept: a freed settings object's id reused by
        # another is never mistaken for it
        self._stores: dict[int, tuple[Mapping[str, Any], dict[Hashable, T]]] = {}

    def get(self, settings: Mapping[str, Any], key: Hashable, compute: Callable[[], T]) -> T:
        kept = self._stores.get(id(settings))
        if kept is None or kept[0] is not settings:
            if len(self._stores) >= 8:
                self._stores.clear()
            kept = self._stores[id(settings)] = (settings, {})
        store = kept[1]
        if key not in store:
            if len(store) >= self._limit:
                store.clear()
            store[key] = compute()
        return store[key]
