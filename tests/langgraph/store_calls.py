"""``Calls``: a LangGraph store's public methods called the sync way or the async way, so
one test case reads the same for both."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.store.base import BaseStore, Item, SearchItem


class Calls:
    """``store``'s public methods, called the sync way (``put``) or the async way (``aput``,
    each on an event loop of its own): a case reads the same either way."""

    def __init__(self, store: BaseStore, mode: str) -> None:
        self.store, self.mode = store, mode

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.store, name)(*args, **kwargs)
        return asyncio.run(getattr(self.store, f"a{name}")(*args, **kwargs))

    def put(self, *args: Any, **kwargs: Any) -> None:
        self._call("put", *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Item | None:
        return self._call("get", *args, **kwargs)

    def delete(self, *args: Any) -> None:
        self._call("delete", *args)

    def search(self, *args: Any, **kwargs: Any) -> list[SearchItem]:
        return self._call("search", *args, **kwargs)

    def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return self._call("list_namespaces", **kwargs)

    def batch(self, ops: list[Any]) -> list[Any]:
        return self._call("batch", ops)
