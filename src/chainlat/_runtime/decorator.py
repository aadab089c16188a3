"""One way to turn an enter/exit pair into a decorator, for sync and async functions alike,
and the mixin that gives a context manager ``async with`` and use as a decorator."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
E = TypeVar("E")


@overload
def around(
    func: Callable[P, Awaitable[R]],
    enter: Callable[[], S],
    leave: Callable[[S, BaseException | None], None],
) -> Callable[P, Awaitable[R]]: ...
@overload
def around(
    func: Callable[P, R], enter: Callable[[], S], leave: Callable[[S, BaseException | None], None]
) -> Callable[P, R]: ...
def around(
    func: Callable[P, Any], enter: Callable[[], S], leave: Callable[[S, BaseException | None], None]
) -> Callable[P, Any]:
    """``func`` with ``enter()`` before each call and ``leave(state, exc)`` after it.

    For an ``async def`` both run around the awaited body, not around the creation of
    the coroutine object (where a plain ``ContextDecorator`` would end a span).
    """
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            state = enter()
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                leave(state, exc)
                raise
            leave(state, None)
            return result

        return run_async

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> Any:
        state = enter()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            leave(state, exc)
            raise
        leave(state, None)
        return result

    return run


class EnterExit(Generic[E, S]):
    """``async with`` and decorating (sync and async) for a context manager.

    ``async with`` runs the class's ``__enter__``/``__exit__``; a decorated call runs
    between ``_open()`` and ``_close(state, exc)``, the state ``_open`` returned.
    """

    def __enter__(self) -> E:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        raise NotImplementedError

    def _open(self) -> S:
        raise NotImplementedError

    def _close(self, state: S, exc: BaseException | None) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> E:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @overload
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...
    def __call__(self, func: Callable[P, Any]) -> Callable[P, Any]:
        return around(func, self._open, self._close)
