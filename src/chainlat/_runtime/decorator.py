"""One way to turn an enter/exit pair into a decorator, for sync and async functions alike."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


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
