"""Pin @assistant-ui/react-ag-ui 0.0.43 in a jaeger-ui v2.20.0 source tree, lockfile included.

    python3 collector/jaeger-ui/patch_lock.py SOURCE_DIR

jaeger-ui v2.20.0 locks ``@assistant-ui/react-ag-ui`` at 0.0.35, which the npm registry
this project builds from does not serve (it has 0.0.32, then 0.0.43 on). This swaps
0.0.43 in, in ``packages/jaeger-ui/package.json`` and in ``pnpm-lock.yaml``, and leaves
every other lockfile entry as it is, so that ``pnpm install --frozen-lockfile`` still
installs exactly what upstream locked. 0.0.43 also imports ``@assistant-ui/store``
directly, so the store (already locked, at 0.3.2) joins its snapshot's dependencies.
Only the optional assistant panel uses the package.

A tree that does not lock 0.0.35 (another jaeger-ui release) is left unchanged. Called by
``collector/build.sh jaeger-ui``; exits 1 with the reason if the lockfile has an
unexpected shape.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OLD, NEW = "0.0.35", "0.0.43"
OLD_INTEGRITY = (
    "sha512-YLTY6CQ9te5aOSycm1yGaf00Ej8vwWUm9DBL3QyWVywvTFgtdVxy0HXDXsfT/"
    "ywVRRhPpFxKnY4a86x+B0PFEQ=="
)
NEW_INTEGRITY = (
    "sha512-pOGGC6oUQ1HT4LGkAvRIRvfb5aJZoT+B/zBI1pYkIzc0Xs8Yv6ipQDzc5IyHDiM2dYU4OcT4OvK4"
    "iQwGEl30aA=="
)
REACT = "(@types/react@19.2.7)(react@19.2.0)"
STORE = f"0.3.2(@assistant-ui/tap@0.9.9{REACT}){REACT}"
"""The locked @assistant-ui/store, as the snapshots name it."""


class UnexpectedLockfile(Exception):
    """The lockfile locks 0.0.35 but not in the shape this patch knows."""


def patch_lockfile(text: str) -> str:
    """The lockfile with react-ag-ui 0.0.43 in place of 0.0.35."""

    def expect(found: int, wanted: int, what: str) -> None:
        if found != wanted:
            raise UnexpectedLockfile(f"{what}: found {found} times, expected {wanted}")

    expect(text.count(OLD_INTEGRITY), 1, "the integrity of react-ag-ui 0.0.35")
    text = text.replace(OLD_INTEGRITY, NEW_INTEGRITY)
    # The importer's entry: `specifier: 0.0.35` then `version: 0.0.35`.
    text, importers = re.subn(
        r"('@assistant-ui/react-ag-ui':\n        specifier: )0\.0\.35(\n        version: )0\.0\.35",
        rf"\g<1>{NEW}\g<2>{NEW}",
        text,
    )
    expect(importers, 1, "the importer's react-ag-ui entry")
    # The package entry and its snapshot.
    expect(text.count(f"react-ag-ui@{OLD}"), 2, f"react-ag-ui@{OLD}")
    text = text.replace(f"react-ag-ui@{OLD}", f"react-ag-ui@{NEW}")
    expect(text.count(f"'@assistant-ui/store@{STORE}':"), 1, "the locked @assistant-ui/store")
    snapshot = text.index(f"  '@assistant-ui/react-ag-ui@{NEW}(")
    dependency = text.index("      assistant-stream:", snapshot)
    store = f"      '@assistant-ui/store': {STORE}\n"
    return text[:dependency] + store + text[dependency:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: patch_lock.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    lockfile = root / "pnpm-lock.yaml"
    manifest = root / "packages" / "jaeger-ui" / "package.json"
    lock_text = lockfile.read_text(encoding="utf-8")
    if f"react-ag-ui@{OLD}" not in lock_text:
        print(f"patch_lock: {lockfile} does not lock react-ag-ui {OLD}; unchanged")
        return 0
    try:
        patched = patch_lockfile(lock_text)
    except UnexpectedLockfile as exc:
        print(f"patch_lock: {lockfile}: {exc}", file=sys.stderr)
        return 1
    pin = f'"@assistant-ui/react-ag-ui": "{OLD}"'
    manifest_text = manifest.read_text(encoding="utf-8")
    if manifest_text.count(pin) != 1:
        print(f"patch_lock: {manifest}: no {pin}", file=sys.stderr)
        return 1
    lockfile.write_text(patched, encoding="utf-8")
    manifest.write_text(manifest_text.replace(pin, pin.replace(OLD, NEW)), encoding="utf-8")
    print(f"patch_lock: react-ag-ui {OLD} -> {NEW} in {manifest.name} and {lockfile.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
