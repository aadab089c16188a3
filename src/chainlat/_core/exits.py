"""The one table of exit codes, shared by every command and the pytest plugin.

``0`` every limit judged and kept; ``1`` a budget broken or a regression found; ``2`` bad
input, an unreachable source, or a limit that could not be judged; ``3`` a bug in chainlat;
``141`` the reader of the output went away (as a process killed by SIGPIPE); ``129`` the
terminal the output was for closed (as a process killed by SIGHUP).
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_BROKEN: Final = 1
EXIT_INPUT: Final = 2
"""Bad input, an unreachable source, or a limit that could not be judged."""
EXIT_INTERNAL: Final = 3
EXIT_BROKEN_PIPE: Final = 128 + 13
"""What a shell reports for a process ended by SIGPIPE (``yes | head``)."""
EXIT_HANGUP: Final = 128 + 1
"""What a shell reports for a process ended by SIGHUP (its terminal closed)."""
EXIT_INTERRUPTED: Final = 128 + 2
"""What a shell reports for a process ended by Ctrl-C (SIGINT)."""

EXIT_CODES_HELP: Final = (
    f"exit codes: {EXIT_OK} ok, {EXIT_BROKEN} a budget broken or a regression found, "
    f"{EXIT_INPUT} bad input, an unreachable source or a limit not judged, "
    f"{EXIT_INTERNAL} a bug in chainlat"
)
"""The table as every command's ``--help`` states it."""
