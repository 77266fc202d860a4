"""A registry of named choices the CLI offers (proposers, executors): one factory per name, imported lazily.

    from agent.registry import Registry
    EXECUTORS = Registry("executor", flag="--executor")

    @EXECUTORS.register("local")
    def _local(**options):
        from agent.board.local import LocalExecutor    # the heavy module loads only when chosen
        return LocalExecutor(...)

    EXECUTORS.names          # ("local",): the flag's choices
    EXECUTORS.make("local", device="cpu")
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> factories, in the order registered."""

    def __init__(self, kind: str, *, flag: str):
        self.kind = kind        # what a choice is, for messages: "executor"
        self.flag = flag        # the flag that picks one, for messages: "--executor"
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def add(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            return factory
        return add

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    def make(self, name: str, **options: Any) -> T:
        """The choice `name` built with `options`; ValueError naming the flag for an unknown name."""
        factory = self._factories.get(name)
        if factory is None:
            raise ValueError(f"{self.flag} must be one of {', '.join(self.names)}, got {name!r}")
        return factory(**options)
