#!/usr/bin/env bash
# Build Jaeger v2 from the Go module proxy into a cache directory.
#
#   collector/build.sh            build unless a binary of the pinned version is cached
#   collector/build.sh --print    the same, then print the binary's path on stdout
#   collector/build.sh --check    print the path if it is cached, exit 1 if not (no build)
#
# The binary lands at ${CHAINLAT_BIN_DIR:-$HOME/.cache/chainlat/bin}/jaeger. The same
# binary runs both collector/jaeger.yaml (storage + query) and collector/otelcol.yaml
# (the Collector tier): Jaeger v2 is an OpenTelemetry Collector distribution.
#
# Jaeger's go.mod carries a `replace` directive, so `go install ...@version` refuses to
# build it. Instead a scratch module under the cache directory requires Jaeger as a
# tool, copies Jaeger's replace directives, and builds the command package. The Go
# module and build caches are the user's usual ones, so a second build is quick.
#
# The UI assets are not part of the Go module (upstream builds them with npm before
# compiling), so this binary serves the full query API but only a placeholder page at /.
set -euo pipefail

# Jaeger v2 tags its Go module with v1 numbers: v1.76.0 is Jaeger v2.13.0.
JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_MODULE_VERSION=${CHAINLAT_JAEGER_MODULE_VERSION:-v1.76.0}
JAEGER_VERSION=${CHAINLAT_JAEGER_VERSION:-v2.13.0}

BIN_DIR=${CHAINLAT_BIN_DIR:-$HOME/.cache/chainlat/bin}
BIN=$BIN_DIR/jaeger
WORK_DIR=$BIN_DIR/.jaeger-build-$JAEGER_MODULE_VERSION

print_path=0
check_only=0
case "${1:-}" in
  --print) print_path=1 ;;
  --check) print_path=1; check_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--print|--check]" >&2; exit 2 ;;
esac

log() { echo "build.sh: $*" >&2; }

cached_version() {
  # `jaeger version` prints {"gitCommit":...,"gitVersion":"v2.13.0",...} on stdout.
  [[ -x $BIN ]] || return 1
  "$BIN" version 2>/dev/null | grep -q "\"gitVersion\":\"$JAEGER_VERSION\""
}

if cached_version; then
  (( check_only )) || log "cached: $BIN ($JAEGER_VERSION)"
  (( print_path )) && echo "$BIN"
  exit 0
fi
if (( check_only )); then
  log "no Jaeger $JAEGER_VERSION at $BIN; build it with collector/build.sh"
  exit 1
fi

command -v go >/dev/null || { log "go is not installed; Go >= 1.24 is needed"; exit 1; }

# Never let `go` fetch another toolchain: only the module proxy is assumed reachable.
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=mod"

mkdir -p "$WORK_DIR"
cd "$WORK_DIR"

if [[ ! -f go.mod ]]; then
  log "scratch module in $WORK_DIR"
  go mod init chainlat.local/jaeger-build >/dev/null 2>&1
  # The `tool` directive needs go >= 1.24; Jaeger's own go line is newer still.
  go mod edit -go=1.24.6
fi

# Copy Jaeger's replace directives: replaces in a dependency's go.mod are ignored.
jaeger_gomod=$(go mod download -json "$JAEGER_MODULE@$JAEGER_MODULE_VERSION" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $jaeger_gomod ]] || { log "could not download $JAEGER_MODULE@$JAEGER_MODULE_VERSION"; exit 1; }
awk '
  /^replace[[:space:]]*\($/ { block = 1; next }
  block && /^\)/ { block = 0; next }
  block { print; next }
  /^replace[[:space:]]/ { sub(/^replace[[:space:]]+/, ""); print }
' "$jaeger_gomod" | while read -r old _arrow new newver; do
  [[ -n $old ]] || continue
  go mod edit -replace="$old=$new${newver:+@$newver}"
done

log "resolving $JAEGER_MODULE/cmd/jaeger@$JAEGER_MODULE_VERSION"
go get -tool "$JAEGER_MODULE/cmd/jaeger@$JAEGER_MODULE_VERSION"

log "compiling Jaeger $JAEGER_VERSION (about 5 minutes cold on 2 cores, seconds with warm Go caches)"
start=$(date +%s)
pkg=$JAEGER_MODULE/internal/version
go build -trimpath -o "$BIN.tmp" \
  -ldflags "-s -w -X $pkg.latestVersion=$JAEGER_VERSION -X $pkg.commitSHA=$JAEGER_MODULE_VERSION -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$JAEGER_MODULE/cmd/jaeger"
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(( $(date +%s) - start ))s ($(du -h "$BIN" | cut -f1))"

cached_version || { log "$BIN does not report $JAEGER_VERSION"; exit 1; }
(( print_path )) && echo "$BIN"
exit 0
