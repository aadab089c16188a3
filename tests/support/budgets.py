"""Budget-file mistakes, each with the one-line message it must produce."""

from __future__ import annotations

MISTAKES: list[tuple[str, str, str, str]] = [
    # (kind, toml body, yaml body, expected message after the file name)
    (
        "unknown key",
        '[workflows.chat]\ntotl = "800ms"\n',
        "workflows:\n  chat:\n    totl: 800ms\n",
        "workflows.chat.totl: unknown key (expected one of: total, inference,",
    ),
    (
        "unknown key in a percentile's table",
        '[workflows.chat]\np95.latncy = "800ms"\n',
        "workflows:\n  chat:\n    p95:\n      latncy: 800ms\n",
        "workflows.chat.p95.latncy: unknown key (expected one of: total, inference, data,",
    ),
    (
        "bad duration",
        '[workflows.chat]\ntotal = "fast"\n',
        "workflows:\n  chat:\n    total: fast\n",
        'workflows.chat.total: expected a duration like "800ms", "1.2s", "250us" or a '
        'number of milliseconds, got "fast"',
    ),
    (
        "negative limit",
        '[workflows.chat.steps."data retrieve-docs"]\nmax = -5\n',
        "workflows:\n  chat:\n    steps:\n      data retrieve-docs:\n        max: -5\n",
        'workflows.chat.steps."data retrieve-docs".max: a limit cannot be negative, got -5',
    ),
    (
        "percentile out of range",
        '[workflows.chat]\np100 = "1s"\n',
        "workflows:\n  chat:\n    p100: 1s\n",
        "workflows.chat.p100: percentile out of range: p100 (expected p1 ... p99.9",
    ),
    (
        "wrong type",
        '[workflows.chat]\nmin_runs = "ten"\n',
        "workflows:\n  chat:\n    min_runs: ten\n",
        'workflows.chat.min_runs: expected a whole number, got "ten"',
    ),
    (
        "wrong type of table",
        "workflows = 5\n",
        "workflows: 5\n",
        "workflows: expected a table of keys, got 5",
    ),
]
