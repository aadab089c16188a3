r"""One credential scrubber for everything chainlat records, exports or prints, and the one
output boundary built on it.

Each function has one job:

- `scrub` (and `scrub_url`, `scrub_value` for a URL or an attribute value): remove
  credentials. Span attributes, exception messages and events, status descriptions and log
  lines pass through it before they leave the process; header allow-lists pass through
  `is_secret_header`.
- `scrub_once`: `scrub`, the result marked `Scrubbed` so that no later layer scrubs it
  again (the strings of a JSON document, built by a renderer and written by the CLI).
- `visible`: the output boundary. Whatever is printed or drawn (a name in a table, a page, a
  document) passes through it once: `scrub`, then control characters escaped. What it
  returns is a `Cleaned` string, which `scrub` and `visible` hand back as it is, so a name
  cleaned where a renderer inserts it is not scrubbed again where the document is written.
- `one_line`: an error or warning line as a command prints it: its lines joined, then
  `visible` once.
- `cleaned_lines`: lines a renderer built only of `visible` pieces and its own words and
  figures (a waterfall), joined and marked `Scrubbed`, so the layer that prints them does
  not scrub them again.

Cutting to a length is :func:`chainlat._core.errors.shorten` (a quoted value in a message)
and :func:`chainlat.report.common.shown_name` (a name on a page, cut after cleaning). Pure
and standard library only, so every layer may use it.

The text comes from the outside world (an error body, a URL, a bytes repr), so it may be
large or hostile: a pattern that scans a run starts only where the run starts (behind a
lookbehind), and every quantifier is possessive, so scrubbing stays linear in the text.

    >>> scrub("Illegal header value b'Bearer sk-proj-AbCdEfGhIjKlMnOpQrStUvWx\\n'")
    "Illegal header value b'[REDACTED]'"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import unquote

REDACTED: Final = "[REDACTED]"

_SECRET_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-amz-security-token",
        "x-amz-signature",
    }
)
_SECRET_WORDS: Final = frozenset(
    {
        "key",
        # "token" only: "tokens" names counts, as in x-ratelimit-remaining-tokens.
        "token",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "pwd",
        "auth",
        "authorization",
        "bearer",
        "credential",
        "credentials",
        "session",
        "signature",
        "sig",
        "cookie",
        "cookies",
        "jwt",
    }
)
_SECRET_SUFFIXES: Final = (
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "token",
    "secret",
    "password",
    "passwd",
    "sessionid",
    "sessid",
)
# A name that ends by saying what it counts or describes is metadata about a credential,
# not one: token_count, x-token-type, KeyError; password_reset_token still is one.
_METADATA_WORDS: Final = frozenset(
    {
        "count",
        "counts",
        "limit",
        "limits",
        "remaining",
        "reset",
        "usage",
        "type",
        "length",
        "size",
        "error",
        "errors",
        "exception",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "name",
        "url",
        "uri",
        "endpoint",
    }
)

_CAMEL: Final = re.compile(r"([a-z0-9])([A-Z])")
_ACRONYM: Final = re.compile(r"([A-Z])([A-Z][a-z])")
_NON_ALNUM: Final = re.compile(r"[^a-z0-9]+")

# A URL's scheme starts with a letter, but the run of scheme characters before "://" is
# taken whole (``--http://u:p@h``, an option name typed as a URL, still has its password);
# it may be missing (``//u:p@h``, scheme-relative) and the slashes JSON-escaped
# (``https:\/\/u:p@h``). Right after them a password may hold quotes and up to four
# spaces (``u:correct horse@h``), as people type them.
_URL: Final = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z0-9+.-]*+:?(?://|\\/\\/)"
    r"(?:[^\s/\\?#@:'\"<>`]*+:[^\s/\\?@]++(?: [^\s/\\?@]++){0,4}+@)?+"
    r"(?:[^\s'\"<>\\`]++|\\/)*+"
)

# A backslash ends the authority too: it starts the JSON escape of the path's slash.
_AUTHORITY_END: Final = re.compile(r"[/?#\s\\]")
_PARAM: Final = re.compile(r"(?<=[?&#;])(?P<name>[^=&#?;\s]*+)=(?P<value>[^&#?;\s]*+)")

_QUOTED: Final = r"b?'(?:[^'\\\n]++|\\.)*+'?|b?\"(?:[^\"\\\n]++|\\.)*+\"?"
# h11 and http.client put the whole header value in the message, without its name.
_HEADER_VALUE_REPR: Final = re.compile(
    r"(?i:(?:illegal|invalid) header value)(?P<sep>:?\s*+)"
    rf"(?P<value>{_QUOTED}|\S++)"
)
_PAIR_NAME: Final = re.compile(
    r"(?<![\w.-])(?P<q>[\"']?)(?P<name>[A-Za-z_][\w.-]*+)(?P=q)\s*+[:=]\s*+"
)
_PAIR_VALUE: Final = re.compile(
    rf"{_QUOTED}|(?:(?i:bearer|basic|token|digest)\s++)?[^\s,;&'\"<>(){{}}\[\]]++"
)
_TUPLE: Final = re.compile(
    r"\(\s*+b?(?P<q>['\"])(?P<name>[\w.-]++)(?P=q)\s*+,\s*+"
    r"(?P<value>b?'(?:[^'\\\n]++|\\.)*+'|b?\"(?:[^\"\\\n]++|\\.)*+\")"
)
# The value stops at a backslash so that the repr escape ending a header read with its
# newline (b'Bearer sk-...\n') stays, but a \xNN escape inside the value does not split it.
# Header names written with a space instead of a colon ("api-key X", "Password X") are
# read as schemes are: the next value is redacted unless it is an ordinary word.
_AUTH_SCHEME: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?=[BbPpAaXx])(?P<scheme>(?i:bearer|basic|(?:x-)?api[-_]?key|password|passwd"
    r"|passphrase|aws_secret_access_key))(?P<sep>\s++)(?![:=])"
    r"(?P<value>(?:[^\s'\"\\,;]++|\\x[0-9a-fA-F]{2})++)"
)
_SHAPES: Final = re.compile(
    # OpenAI sk-, sk-proj-, sk-svcacct- and Anthropic sk-ant-; the callback decides.
    r"(?<![A-Za-z0-9_])sk-[A-Za-z0-9_*-]++"
    r"|(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35,}+"
    r"|(?<![A-Za-z0-9])A[KS]IA[A-Z0-9]{16,}+"
    r"|(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{20,}+"
    r"|(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,}+"
    r"|(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}+"
    r"|(?<![A-Za-z0-9_-])xox[abeoprs]-[A-Za-z0-9-]{10,}+"
    r"|(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]++"
    r"\.[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]++)*+"
)
_SK_MIN_CHARS: Final = 20
_WORD_MAX_CHARS: Final = 16


def is_secret_header(name: str) -> bool:
    """Whether a header carries a credential by its name alone, whatever an allow-list says."""
    return name.strip().lower() in _SECRET_HEADERS or _is_secret_name(name)


def scrub_url(url: str) -> str:
    """The URL with its userinfo password, secret query values and known key shapes redacted."""
    # Every "//" and every parameter, not only the first: URLs nest (?next=https://u:p@h).
    out: list[str] = []
    pos = 0
    escaped, plain = url.find("\\/\\/"), url.find("//")
    while True:
        # Each searched again only once passed: linear, however many slashes there are.
        if 0 <= escaped < pos:
            escaped = url.find("\\/\\/", pos)
        if 0 <= plain < pos:
            plain = url.find("//", pos)
        if escaped >= 0 and (plain < 0 or escaped < plain):
            start = escaped + 4
        elif plain >= 0:
            start = plain + 2
        else:
            break
        end_match = _AUTHORITY_END.search(url, start)
        end = end_match.start() if end_match else len(url)
        at = url.rfind("@", start, end)
        if at < 0 and url[end : end + 1] in (" ", "#"):
            # A password with a space or a "#" in it, as people type them.
            loose = _loose_userinfo().match(url, start)
            if loose and not _is_port(loose["user"], loose["password"]):
                at = loose.end() - 1
                end_match = _AUTHORITY_END.search(url, at)
                end = end_match.start() if end_match else len(url)
        out.append(url[pos:start])
        if at >= 0:
            user, colon, password = url[start:at].partition(":")
            if colon and password:
                out.append(f"{user}:{REDACTED}")
            elif not colon and user:
                out.append(REDACTED)
            else:
                out.append(url[start:at])
            start = at
        out.append(url[start:end])
        pos = end
    out.append(url[pos:])
    return _scrub_shapes(_PARAM.sub(_redact_param, "".join(out)))


@functools.cache
def _loose_userinfo() -> re.Pattern[str]:
    """``user:pass word@`` or ``user:pa#ss@``: up to four spaces, any "#"; compiled on first
    use (a userinfo that needs it is rare), not when chainlat is imported."""
    word = r"[^\s/\\?@]++"
    return re.compile(rf"(?P<user>[^\s/\\?#@:]*+):(?P<password>{word}(?: {word}){{0,4}}+)@")


def _is_port(user: str, password: str) -> bool:
    """``example.com:8080 is down, mail ops@x.com``: a host and its port, then prose."""
    digits = len(password) - len(password.lstrip("0123456789"))
    host = "." in user or user == "localhost"
    return host and digits > 0 and not password[digits : digits + 1].isalnum()


class Scrubbed(str):
    """Text :func:`scrub_once` scrubbed (its control characters as they were): :func:`scrub`
    returns it unchanged, so a text is scrubbed once however many layers it passes on its
    way out (a JSON document built, then written). Only this module makes one; any change to
    it (formatting, joining, slicing) gives a plain ``str``, scrubbed again."""

    __slots__ = ()


class Cleaned(Scrubbed):
    """Text that has passed :func:`visible` (credentials scrubbed, control characters and
    newlines escaped): :func:`scrub` and :func:`visible` return it unchanged."""

    __slots__ = ()


def scrub(text: str) -> str:
    """Remove credentials: free text (a message, status description, log or CLI line) with
    every credential redacted; a :class:`Scrubbed` text, scrubbed already, as it is.

    Example:
        >>> scrub("Client error for url 'https://api.example.com/v1?key=hunter2'")
        "Client error for url 'https://api.example.com/v1?key=[REDACTED]'"
    """
    if isinstance(text, Scrubbed):
        return text
    text = _HEADER_VALUE_REPR.sub(_redact_header_repr, text)
    text = _URL.sub(lambda m: scrub_url(m.group()), text)
    text = _TUPLE.sub(_redact_tuple, text)
    text = _scrub_pairs(text)
    text = _AUTH_SCHEME.sub(_redact_auth_scheme, text)
    return _scrub_shapes(text)


def scrub_once(text: str) -> Scrubbed:
    """Remove credentials, as :func:`scrub`, marking the result :class:`Scrubbed`: for text
    that more than one layer may scrub (a JSON document's strings)."""
    return text if isinstance(text, Scrubbed) else Scrubbed(scrub(text))


def scrub_value(value: object, _depth: int = 0) -> object:
    """A span attribute value with every string in it scrubbed, whatever its shape: mixed-type
    and nested arrays and key/value lists (as trace files hold them) included; other values
    unchanged. Deeper than 32 levels the value is dropped, not shown unscrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, bytes | bytearray) or not _holds_text(value):
        return value
    if _depth >= _MAX_DEPTH and isinstance(value, Sequence | Mapping):
        return REDACTED
    if isinstance(value, Mapping):
        return {
            scrub(str(k)): REDACTED if is_secret_header(str(k)) else scrub_value(v, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, Sequence):
        return tuple(scrub_value(item, _depth + 1) for item in value)
    return value


_MAX_DEPTH: Final = 32


def _holds_text(value: object) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, Sequence) and any(
        isinstance(item, str | Mapping)
        or (isinstance(item, Sequence) and not isinstance(item, bytes | bytearray))
        for item in value
    )


def _is_secret_name(name: str) -> bool:
    # Names repeat (the same JSON keys, the same query parameters) and are short.
    return _is_secret_short_name(name) if len(name) <= 64 else _name_is_secret(name)


@functools.lru_cache(maxsize=1024)
def _is_secret_short_name(name: str) -> bool:
    return _name_is_secret(name)


def _name_is_secret(name: str) -> bool:
    # Split at case changes (apiKey, XApiKey) and, since header names have no case, also
    # without them (api-keY, APIKEY): either reading that names a credential counts.
    spaced = _ACRONYM.sub(r"\1 \2", _CAMEL.sub(r"\1 \2", name))
    return _words_are_secret(spaced.lower()) or _words_are_secret(name.lower())


def _words_are_secret(name: str) -> bool:
    words = [word for word in _NON_ALNUM.split(name) if word]
    if not words or words[-1] in _METADATA_WORDS:
        return False
    return any(word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES) for word in words)


def _redact_param(match: re.Match[str]) -> str:
    if match["value"] and _is_secret_name(unquote(match["name"])):
        return f"{match['name']}={REDACTED}"
    return match.group()


def _redact_quoted(value: str) -> str:
    """`b'x'` -> `b'[REDACTED]'`, keeping the prefix and the quotes that were there."""
    prefix = "b" if value.startswith("b") and value[1:2] in ("'", '"') else ""
    quote = value[len(prefix) : len(prefix) + 1]
    if quote not in ("'", '"'):
        return REDACTED
    body = value[len(prefix) + 1 :]
    closed = len(body) >= 1 and body.endswith(quote) and not _escaped_end(body[:-1])
    inner = body[:-1] if closed else body
    if not inner:
        return value
    return f"{prefix}{quote}{REDACTED}{quote if closed else ''}"


def _escaped_end(text: str) -> bool:
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _redact_header_repr(match: re.Match[str]) -> str:
    return match.group()[: match.start("value") - match.start()] + _redact_quoted(match["value"])


def _redact_tuple(match: re.Match[str]) -> str:
    if not is_secret_header(match["name"]):
        return match.group()
    head = match.group()[: match.start("value") - match.start()]
    return head + _redact_quoted(match["value"])


def _scrub_pairs(text: str) -> str:
    # A hand-rolled sub that reads a value only after a secret name: after any other name
    # scanning resumes where its value starts, so "message": "... api_key=..." is still
    # searched inside, and a run like a=a=a=... costs one pass, not one pass per pair.
    out: list[str] = []
    pos = 0
    while (name := _PAIR_NAME.search(text, pos)) is not None:
        value_start = name.end()
        out.append(text[pos:value_start])
        pos = value_start
        if (
            _is_secret_name(name["name"])
            and (value := _PAIR_VALUE.match(text, pos))
            and not (_is_word(value.group()) and name.group().rstrip().endswith(":"))
        ):
            out.append(_redact_quoted(value.group()))
            pos = value.end()
    out.append(text[pos:])
    return "".join(out)


def _is_word(text: str) -> bool:
    """An ordinary word ("required", "Basic"), not a value a credential could be."""
    return len(text) <= _WORD_MAX_CHARS and text.isalpha() and text[1:].islower()


def _redact_auth_scheme(match: re.Match[str]) -> str:
    value = match["value"]
    word = value.rstrip("=")
    # "Bearer token required", "Basic usage", 'Bearer realm="api"', "passphrase (optional)"
    # are prose, not credentials.
    if _is_word(word) or value.startswith(("(", "[", "{", "<")):
        return match.group()
    return f"{match['scheme']}{match['sep']}{REDACTED}"


def _redact_shape(match: re.Match[str]) -> str:
    found = match.group()
    if found.startswith("sk-"):
        body = found[3:]
        # A provider's own masking (sk-proj-****abcd) still shows part of the key.
        if "***" not in body and len(body.replace("*", "")) < _SK_MIN_CHARS:
            return found
    return REDACTED


def _scrub_shapes(text: str) -> str:
    # Rare shapes have a marker a substring test finds faster than any pattern: the common
    # text (no marker) pays three scans in C, not a longer alternation at every character.
    if "AKIA" in text or "ASIA" in text or "hooks.slack.com" in text:
        text = _rare_shapes().sub(_redact_rare_shape, text)
    return _SHAPES.sub(_redact_shape, text)


@functools.cache
def _rare_shapes() -> re.Pattern[str]:
    """An AWS secret access key (40 characters of base64) beside its ``AKIA``/``ASIA`` key
    id, on either side (the id itself is one of `_SHAPES`), and a Slack incoming webhook
    (the path after ``/services/`` is the credential). Compiled on first use."""
    sep = r"[\s,:;|'\"=]{1,4}+"
    return re.compile(
        rf"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{{40}}(?={sep}A[KS]IA[A-Z0-9]{{16}})"
        rf"|(?<=A[KS]IA[A-Z0-9]{{16}})(?P<sep>{sep})[A-Za-z0-9/+]{{40}}(?![A-Za-z0-9/+=])"
        r"|(?<![A-Za-z0-9_-])(?P<slack>hooks\.slack\.com\\?/services)(?P<slash>\\?/)"
        r"(?:[A-Za-z0-9_-]++|\\?/)++"
    )


def _redact_rare_shape(match: re.Match[str]) -> str:
    if match["slack"]:
        return f"{match['slack']}{match['slash']}{REDACTED}"
    return f"{match['sep'] or ''}{REDACTED}"


# C0 controls, DEL and C1 controls, and the bidirectional controls and line separators that
# reorder or break what a terminal shows (U+202E turns "exe.txt" into "txt.exe"); newline
# is kept or not by the caller.
_BIDI: Final = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"


@functools.cache
def _unshown(newline: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What :func:`visible` replaces: lone surrogates, and the control characters (newline
    among them unless ``newline``). Compiled on first use, not when a command starts."""
    low = "\\x00-\\x09\\x0b-\\x1f" if newline else "\\x00-\\x1f"
    return re.compile(r"[\ud800-\udfff]"), re.compile(f"[{low}\\x7f-\\x9f{_BIDI}]")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newline: bool = False) -> str:
    """The output boundary: a name or value as chainlat shows it anywhere (terminal, page,
    document, error line), credentials scrubbed (:func:`scrub`), control and bidirectional
    characters as ``\\x1b``/``\\u202e``-style escapes (newline kept when ``newline``), lone
    surrogates as U+FFFD. Without ``newline`` the result is :class:`Cleaned`, and a
    :class:`Cleaned` text comes back as it is."""
    if isinstance(text, Cleaned):
        return text
    surrogates, controls = _unshown(newline)
    unshown = surrogates.sub("\ufffd", text)  # a plain str: the mark is read from ``text``
    if not isinstance(text, Scrubbed):
        unshown = scrub(unshown)
    shown = controls.sub(_escape_control, unshown)
    return shown if newline else Cleaned(shown)


def cleaned_lines(lines: Sequence[str]) -> Scrubbed:
    """Lines made only of pieces that passed :func:`visible` and of the renderer's own words
    and figures, joined by newlines and marked :class:`Scrubbed`: the layers they pass on
    their way out (``render_text``, a page's escaping) scrub them no more. The caller
    answers for every piece: a name put in uncleaned would be printed as it is (the
    waterfall's tests feed a credential and a control character to each of its inputs)."""
    return Scrubbed("\n".join(lines))


def one_line(text: str) -> str:
    """Make an error or warning printable on one line: its lines stripped and joined by a
    space, then :func:`visible` (no credential, no control character), scrubbed once."""
    return visible(" ".join(line.strip() for line in text.splitlines()))
