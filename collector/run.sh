#!/usr/bin/env bash
# Run chainlat's trace pipeline from source: Jaeger v2 plus the Collector tier, both on
# the one binary that collector/build.sh makes.
#
#   collector/run.sh start [all|jaeger|collector]   build on first use, start, wait until ready
#   collector/run.sh stop [all|jaeger|collector]    stop what start started
#   collector/run.sh status                         which of the two run, with pids
#   collector/run.sh validate [CONFIG...]           check configs with the real binary
#                                                   (default: otelcol.yaml and jaeger.yaml)
#
# Then: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 chainlat demo
#       and open http://127.0.0.1:16686 (placeholder UI page; the API is complete).
#
# Addresses and sampling knobs are the environment variables the two configs read (see
# collector/README.md); this script only fills in the defaults it needs to know. Pid
# files and logs go to ${CHAINLAT_RUN_DIR:-$HOME/.cache/chainlat/run}: use one run
# directory per running pipeline. With CHAINLAT_STOP_WITH_PID=PID set, the processes
# also stop when process PID exits (test sessions set it, so a killed run leaves nothing).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN_DIR=${CHAINLAT_RUN_DIR:-$HOME/.cache/chainlat/run}
READY_TIMEOUT_S=${CHAINLAT_READY_TIMEOUT_S:-60}
STOP_TIMEOUT_S=10

# Defaults mirror those in jaeger.yaml and otelcol.yaml.
export CHAINLAT_JAEGER_HOST=${CHAINLAT_JAEGER_HOST:-127.0.0.1}
export CHAINLAT_JAEGER_OTLP_GRPC_PORT=${CHAINLAT_JAEGER_OTLP_GRPC_PORT:-14317}
export CHAINLAT_JAEGER_OTLP_HTTP_PORT=${CHAINLAT_JAEGER_OTLP_HTTP_PORT:-14318}
export CHAINLAT_JAEGER_QUERY_PORT=${CHAINLAT_JAEGER_QUERY_PORT:-16686}
export CHAINLAT_JAEGER_QUERY_GRPC_PORT=${CHAINLAT_JAEGER_QUERY_GRPC_PORT:-16685}
export CHAINLAT_JAEGER_HEALTH_PORT=${CHAINLAT_JAEGER_HEALTH_PORT:-13133}
export CHAINLAT_COLLECTOR_HOST=${CHAINLAT_COLLECTOR_HOST:-127.0.0.1}
export CHAINLAT_COLLECTOR_OTLP_GRPC_PORT=${CHAINLAT_COLLECTOR_OTLP_GRPC_PORT:-4317}
export CHAINLAT_COLLECTOR_OTLP_HTTP_PORT=${CHAINLAT_COLLECTOR_OTLP_HTTP_PORT:-4318}
export CHAINLAT_COLLECTOR_PROMETHEUS_PORT=${CHAINLAT_COLLECTOR_PROMETHEUS_PORT:-8889}
export CHAINLAT_COLLECTOR_METRICS_PORT=${CHAINLAT_COLLECTOR_METRICS_PORT:-8888}
export CHAINLAT_COLLECTOR_JAEGER_ENDPOINT=${CHAINLAT_COLLECTOR_JAEGER_ENDPOINT:-$(
  [[ $CHAINLAT_JAEGER_HOST == 0.0.0.0 ]] && echo 127.0.0.1 || echo "$CHAINLAT_JAEGER_HOST"
):$CHAINLAT_JAEGER_OTLP_GRPC_PORT}

log() { echo "run.sh: $*" >&2; }
die() { log "$*"; exit 1; }

binary() {
  # Builds on first use (about 5 minutes cold), then answers from the cache.
  "$HERE/build.sh" --print
}

# A wildcard listen address is reached through loopback.
dial_host() { [[ $1 == 0.0.0.0 ]] && echo 127.0.0.1 || echo "$1"; }

port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# Alive and not a zombie: an exited child of ours waits as a zombie until init reaps it.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

pid_file() { echo "$RUN_DIR/$1.pid"; }

# The pid in NAME's pid file, if that process is still the one we started.
running_pid() {
  local file pid
  file=$(pid_file "$1")
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ -r /proc/$pid/cmdline ]] || return 1
  # Guards against a recycled pid: the process must still run our config.
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "--config=$(config_of "$1")" || return 1
  echo "$pid"
}

config_of() {
  case $1 in
    jaeger) echo "$HERE/jaeger.yaml" ;;
    collector) echo "$HERE/otelcol.yaml" ;;
  esac
}

# Ports a process must listen on before it counts as ready. Receivers start last in a
# Collector, so an open OTLP port means the whole pipeline is up.
ready_ports() {
  case $1 in
    jaeger)
      local h
      h=$(dial_host "$CHAINLAT_JAEGER_HOST")
      echo "$h:$CHAINLAT_JAEGER_QUERY_PORT $h:$CHAINLAT_JAEGER_OTLP_GRPC_PORT $h:$CHAINLAT_JAEGER_OTLP_HTTP_PORT"
      ;;
    collector)
      local h
      h=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
      echo "$h:$CHAINLAT_COLLECTOR_PROMETHEUS_PORT $h:$CHAINLAT_COLLECTOR_OTLP_GRPC_PORT $h:$CHAINLAT_COLLECTOR_OTLP_HTTP_PORT"
      ;;
  esac
}

start_one() {
  local name=$1 bin=$2 config pid log_file deadline addr
  if pid=$(running_pid "$name"); then
    log "$name already running (pid $pid)"
    return 0
  fi
  config=$(config_of "$name")
  log_file="$RUN_DIR/$name.log"
  for addr in $(ready_ports "$name"); do
    ! port_open "${addr%:*}" "${addr##*:}" || die "$name: $addr is already in use"
  done
  # nohup execs the binary, so $! is its pid; it outlives this script.
  nohup "$bin" "--config=$config" >"$log_file" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$(pid_file "$name")"
  if [[ -n ${CHAINLAT_STOP_WITH_PID:-} ]]; then
    # Stop when the owner exits, even if it never gets to call `stop`.
    nohup bash -c '
      while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
      # Only if the owner is gone and $2 is still our process (not a recycled pid).
      if ! kill -0 "$1" 2>/dev/null && tr "\0" "\n" <"/proc/$2/cmdline" | grep -qxF -- "$3"; then
        kill -TERM "$2"
      fi
    ' watch "$CHAINLAT_STOP_WITH_PID" "$pid" "--config=$config" >/dev/null 2>&1 </dev/null &
  fi
  deadline=$(( SECONDS + READY_TIMEOUT_S ))
  for addr in $(ready_ports "$name"); do
    until port_open "${addr%:*}" "${addr##*:}"; do
      if ! alive "$pid"; then
        rm -f "$(pid_file "$name")"
        tail -n 20 "$log_file" >&2
        die "$name exited during start-up (log: $log_file)"
      fi
      if (( SECONDS >= deadline )); then
        tail -n 20 "$log_file" >&2
        stop_one "$name"
        die "$name not ready on $addr after ${READY_TIMEOUT_S}s (log: $log_file)"
      fi
      sleep 0.2
    done
  done
  log "$name ready (pid $pid, log $log_file)"
}

stop_one() {
  local name=$1 pid deadline
  if ! pid=$(running_pid "$name"); then
    rm -f "$(pid_file "$name")"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$(( SECONDS + STOP_TIMEOUT_S ))
  while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
  if alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_S}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(pid_file "$name")"
  log "$name stopped"
}

which_ones() {
  case ${1:-all} in
    all) echo "jaeger collector" ;;
    jaeger | collector) echo "$1" ;;
    *) die "unknown process '$1' (all, jaeger or collector)" ;;
  esac
}

print_endpoints() {
  local jh ch
  jh=$(dial_host "$CHAINLAT_JAEGER_HOST")
  ch=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
  cat <<EOF
collector OTLP HTTP   http://$ch:$CHAINLAT_COLLECTOR_OTLP_HTTP_PORT   (OTEL_EXPORTER_OTLP_ENDPOINT)
collector OTLP gRPC   $ch:$CHAINLAT_COLLECTOR_OTLP_GRPC_PORT
span metrics          http://$ch:$CHAINLAT_COLLECTOR_PROMETHEUS_PORT/metrics
Jaeger query API/UI   http://$jh:$CHAINLAT_JAEGER_QUERY_PORT
EOF
}

cmd=${1:-}
shift || true
case $cmd in
  start)
    names=$(which_ones "${1:-all}")
    mkdir -p "$RUN_DIR"
    bin=$(binary)
    for name in $names; do start_one "$name" "$bin"; done
    if [[ ${1:-all} == all ]]; then print_endpoints; fi
    ;;
  stop)
    names=$(which_ones "${1:-all}")
    # The Collector first, so it can flush to a Jaeger that still listens.
    for name in $(echo "$names" | tr ' ' '\n' | tac); do stop_one "$name"; done
    ;;
  status)
    for name in jaeger collector; do
      if pid=$(running_pid "$name"); then echo "$name running (pid $pid)"; else echo "$name stopped"; fi
    done
    ;;
  validate)
    bin=$(binary)
    (( $# )) || set -- "$HERE/otelcol.yaml" "$HERE/jaeger.yaml"
    errors=$(mktemp)
    trap 'rm -f "$errors"' EXIT
    failed=0
    for config in "$@"; do
      if "$bin" validate "--config=$config" >/dev/null 2>"$errors"; then
        echo "ok       $config"
      else
        # The binary logs start-up lines too; the reason is in the last ones.
        tail -n 5 "$errors" >&2
        echo "INVALID  $config"
        failed=1
      fi
    done
    exit "$failed"
    ;;
  *)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
