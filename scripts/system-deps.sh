#!/usr/bin/env bash
# Debian packages the test suite uses: Chromium renders the HTML report headless, and
# Playwright drives it for the run explorer's browser tests (tests/browser/): always this
# Chromium, never a browser Playwright would download. Fonts come with it (fontconfig).
# A JDK (17 or newer) and Maven build the interop matrix's Java agent (tests/interop/java/).
# Installs them when missing and when it can (root with apt-get); otherwise says so
# in one line, and the tests that need them skip with a visible reason (they fail
# instead under CHAINLAT_REQUIRE_INTEGRATION=1, as in .ci/run).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: missing ${missing[*]} (install with apt-get as root); the tests that need them will skip"
    exit 0
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
