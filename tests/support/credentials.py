"""Credential-shaped strings for the scrubber tests (``chainlat._core.redact``).

Keys are assembled at run time, so no secret scanner mistakes these files for a leak.
``SHAPED`` holds every key with a shape of its own; ``PLAIN_SECRET`` has none, only its
place (``api_key=...``, ``Bearer ...``) gives it away.
"""

from __future__ import annotations

OPENAI_KEY = "sk-proj-" + "AbC123xYz_-9" * 6
OPENAI_SERVICE_KEY = "sk-svcacct-" + "Qw3rTy7u" * 4
OPENAI_LEGACY_KEY = "sk-" + "T3BlbkFJ" * 6
ANTHROPIC_KEY = "sk-ant-api03-" + "aB9_cD8-eF7" * 8
GOOGLE_KEY = "AIza" + "Sy" + "D3fG5hJ7kL9mN1pQ3rS5tU7vW9xY1zA3b"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_KEY_ID = "ASIA" + "Z7XK4Q2M9B3N5P8R"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"
GITHUB_OAUTH = "gho_" + "Z9y8X7w6V5u4T3s2R1q0" + "P9o8N7m6L5k4J3i2"
GITHUB_SERVER = "ghs_" + "1234567890abcdefABCD" + "EFghij1234567890"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + "abcdefghijklmnopqrstuv_" * 3
SLACK_TOKEN = "xoxb-" + "1234567890-0987654321-" + "AbCdEfGhIjKlMnOp"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SHAPED = [
    OPENAI_KEY,
    OPENAI_SERVICE_KEY,
    OPENAI_LEGACY_KEY,
    ANTHROPIC_KEY,
    GOOGLE_KEY,
    AWS_KEY_ID,
    AWS_SESSION_KEY_ID,
    GITHUB_TOKEN,
    GITHUB_OAUTH,
    GITHUB_SERVER,
    GITHUB_PAT,
    SLACK_TOKEN,
    JWT,
]
PLAIN_SECRET = "hunter2-Plain-7"
