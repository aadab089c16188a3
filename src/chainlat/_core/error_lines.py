"""How every command prints an error or a warning: one line on stderr, credentials scrubbed
and control characters escaped (:func:`chainlat._core.redact.one_line`); and a bad argument
the same way, with exit 2, never argparse's usage dump. ``chainlat`` and the commands that
parse their own options (``demo``, ``sim``) print through it."""

from __future__ import annotations

import argparse
from typing import NoReturn

from chainlat._core.exits import EXIT_INPUT
from chainlat._core.redact import one_line


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are
    :func:`~chainlat._core.redact.one_line` and exit 2."""

    def error(self, message: str) -> NoReturn:
        # argparse's own usage errors are bad input too. They quote the argument given,
        # which may be a URL with a password.
        self.exit(EXIT_INPUT, f"{one_line(f'{self.prog}: error: {message}')}\n")
