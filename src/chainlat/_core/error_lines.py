"""How every command prints an error or a warning: one line on stderr, credentials scrubbed
and control characters escaped; and a bad argument the same way, with exit 2, never
argparse's usage dump. ``chainlat`` and the commands that parse their own options
(``demo``, ``sim``) print through it."""

from __future__ import annotations

import argparse
from typing import NoReturn

from chainlat._core.exits import EXIT_INPUT
from chainlat._core.redact import scrub, visible


def one_line(text: str) -> str:
    """An error as a command prints it: one line, no credential, no control character."""
    return visible(" ".join(line.strip() for line in scrub(text).splitlines()))


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are :func:`one_line` and exit 2."""

    def error(self, message: str) -> NoReturn:
        # argparse's own usage errors are bad input too. They quote the argument given,
        # which may be a URL with a password.
        self.exit(EXIT_INPUT, f"{one_line(f'{self.prog}: error: {message}')}\n")
