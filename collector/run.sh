#!/usr/bin/env bash
# Run chainlat's trace pipeline from source, no containers: Jaeger v2, the Collector tier
# (chainlat-otelcol) and, scaled out, Prometheus; binaries from collector/build.sh.
#
#   collector/run.sh start [all|tier|NAME]   build on first use, start, wait until ready
#   collector/run.sh stop [all|tier|NAME]    stop what start started
#   collector/run.sh status                  which processes run, with pids
#   collector/run.sh validate [CONFIG...]    check configs with the real binaries
#                                            (default: every shipped config)
#
#   all    jaeger + collector: one sampling Collector on 4317/4318 in front of Jaeger
#   tier   the scaled tier: jaeger, CHAINLAT_SAMPLING_REPLICAS (2) sampling replicas
#          (replica-1, replica-2, ...), the load balancer (lb) on 4317/4318, and
#          prometheus on 9090 scraping the replicas and evaluating
#          CHAINLAT_PROMETHEUS_RULES (a file from `chainlat budgets rules`)
#   NAME   one of jaeger, collector, replica-K, lb, prometheus
#
# Then: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 chainlat demo
#       and open http://127.0.0.1:16686: Jaeger's UI from CHAINLAT_JAEGER_UI (a built
#       jaeger-ui directory) or else from `collector/build.sh jaeger-ui`'s cache, if built;
#       otherwise the binary's placeholder page (the query API is complete either way).
#
# Addresses and sampling knobs are the environment variables the configs read (see
# collector/README.md); this script only fills in the defaults it needs to know. Pid
# files, logs and the data of Jaeger (Badger) and Prometheus go to
# ${CHAINLAT_RUN_DIR:-$HOME/.cache/chainlat/run}: use one run directory per running
# pipeline. With CHAINLAT_STOP_WITH_PID=PID set, the processes also stop when process
# PID exits (test sessions set it, so a killed run leaves nothing).
#
# `start NAME` saves the CHAINLAT_* settings it was given in $RUN_DIR/NAME.env (each
# process of a group too), and a later `start NAME` restores those the caller does not
# set again: `stop replica-1` then `start replica-1` runs it on its ports, with its
# CHAINLAT_SPANMETRICS_BUCKETS and decision wait, as before. Set a variable to change
# it; remove the file to start from the defaults. Credentials (CHAINLAT_*_USERNAME,
# _PASSWORD, _TOKEN, _SECRET) are never saved.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN_DIR=${CHAINLAT_RUN_DIR:-$HOME/.cache/chainlat/run}

# Settings a process keeps across restarts: every CHAINLAT_* the caller set, except where
# the run directory is, which process owns this run, and credentials.
saved_setting() {
  [[ $1 =~ ^CHAINLAT_[A-Z0-9_]+$ ]] || return 1
  case $1 in
    CHAINLAT_RUN_DIR | CHAINLAT_STOP_WITH_PID | CHAINLAT_READY_TIMEOUT_S) return 1 ;;
    *_USERNAME | *_PASSWORD | *_TOKEN | *_SECRET) return 1 ;;
  esac
}

# Before the defaults below: what `start NAME` last ran with, for what the caller did
# not set now.
restore_settings() {
  local file="$RUN_DIR/$1.env" line name restored=()
  [[ -f $file ]] || return 0
  # NAME=VALUE records, each ended by a NUL: a value may hold any other character.
  while IFS= read -r -d '' line; do
    name=${line%%=*}
    saved_setting "$name" || continue
    if [[ -z ${!name+x} ]]; then
      export "$name=${line#*=}"
      restored+=("$name")
    fi
  done <"$file"
  if (( ${#restored[@]} )); then
    echo "run.sh: $1: restored ${restored[*]} from $file" >&2
  fi
}

if [[ ${1:-} == start && ${2:-all} =~ ^[a-z]+(-[0-9]+)?$ ]]; then restore_settings "${2:-all}"; fi
# The settings as given (and restored), before the defaults: what `start` saves.
declare -A CALLER_SETTINGS=()
for name in $(compgen -e); do
  if saved_setting "$name"; then
    value=${!name}
    # A relative path (a rules file, a UI) is saved as it resolves from here, so that a
    # restart from another directory finds the same file.
    if [[ -n $value && $value != /* && -e $value ]]; then value=$PWD/$value; fi
    CALLER_SETTINGS[$name]=$value
  fi
done
save_settings() {
  local name
  for name in "${!CALLER_SETTINGS[@]}"; do
    printf '%s=%s\0' "$name" "${CALLER_SETTINGS[$name]}"
  done >"$1"
}
READY_TIMEOUT_S=${CHAINLAT_READY_TIMEOUT_S:-60}
STOP_TIMEOUT_S=10
# Records in each kept span which tail-sampling policy kept it (tailsampling.policy), and
# counts the spans each policy decided on (otelcol_processor_tail_sampling_count_spans_sampled),
# so that spans a replica holds undecided are its accepted spans less the decided ones.
FEATURE_GATES=processor.tailsamplingprocessor.recordpolicy,processor.tailsamplingprocessor.metricstatcountspanssampled

# Defaults mirror those in the configs.
export CHAINLAT_JAEGER_HOST=${CHAINLAT_JAEGER_HOST:-127.0.0.1}
export CHAINLAT_JAEGER_OTLP_GRPC_PORT=${CHAINLAT_JAEGER_OTLP_GRPC_PORT:-14317}
export CHAINLAT_JAEGER_OTLP_HTTP_PORT=${CHAINLAT_JAEGER_OTLP_HTTP_PORT:-14318}
export CHAINLAT_JAEGER_QUERY_PORT=${CHAINLAT_JAEGER_QUERY_PORT:-16686}
export CHAINLAT_JAEGER_QUERY_GRPC_PORT=${CHAINLAT_JAEGER_QUERY_GRPC_PORT:-16685}
export CHAINLAT_JAEGER_HEALTH_PORT=${CHAINLAT_JAEGER_HEALTH_PORT:-13133}
export CHAINLAT_JAEGER_DATA_DIR=${CHAINLAT_JAEGER_DATA_DIR:-$RUN_DIR/jaeger-data}
export CHAINLAT_COLLECTOR_HOST=${CHAINLAT_COLLECTOR_HOST:-127.0.0.1}
export CHAINLAT_COLLECTOR_OTLP_GRPC_PORT=${CHAINLAT_COLLECTOR_OTLP_GRPC_PORT:-4317}
export CHAINLAT_COLLECTOR_OTLP_HTTP_PORT=${CHAINLAT_COLLECTOR_OTLP_HTTP_PORT:-4318}
export CHAINLAT_COLLECTOR_PROMETHEUS_PORT=${CHAINLAT_COLLECTOR_PROMETHEUS_PORT:-8889}
export CHAINLAT_COLLECTOR_METRICS_PORT=${CHAINLAT_COLLECTOR_METRICS_PORT:-8888}
export CHAINLAT_COLLECTOR_HEALTH_PORT=${CHAINLAT_COLLECTOR_HEALTH_PORT:-13134}
export CHAINLAT_COLLECTOR_JAEGER_ENDPOINT=${CHAINLAT_COLLECTOR_JAEGER_ENDPOINT:-$(
  [[ $CHAINLAT_JAEGER_HOST == 0.0.0.0 ]] && echo 127.0.0.1 || echo "$CHAINLAT_JAEGER_HOST"
):$CHAINLAT_JAEGER_OTLP_GRPC_PORT}
# The baseline policy's share as a probability, for chainlat.sampling.probability.
export CHAINLAT_SAMPLING_PERCENT=${CHAINLAT_SAMPLING_PERCENT:-10}
export CHAINLAT_SAMPLING_PROBABILITY=${CHAINLAT_SAMPLING_PROBABILITY:-$(
  awk -v p="$CHAINLAT_SAMPLING_PERCENT" 'BEGIN { printf "%.6g", p / 100 }'
)}
# The scaled tier: replica K listens on REPLICA_BASE_PORT + 10 * (K - 1) + 0..4 (OTLP gRPC,
# OTLP HTTP, span metrics, own metrics, health); the load balancer on the usual 4317/4318.
SAMPLING_REPLICAS=${CHAINLAT_SAMPLING_REPLICAS:-2}
REPLICA_BASE_PORT=${CHAINLAT_REPLICA_BASE_PORT:-14417}
export CHAINLAT_LB_HOST=${CHAINLAT_LB_HOST:-127.0.0.1}
export CHAINLAT_LB_OTLP_GRPC_PORT=${CHAINLAT_LB_OTLP_GRPC_PORT:-4317}
export CHAINLAT_LB_OTLP_HTTP_PORT=${CHAINLAT_LB_OTLP_HTTP_PORT:-4318}
export CHAINLAT_LB_HEALTH_PORT=${CHAINLAT_LB_HEALTH_PORT:-13135}
export CHAINLAT_LB_METRICS_PORT=${CHAINLAT_LB_METRICS_PORT:-8887}
PROMETHEUS_HOST=${CHAINLAT_PROMETHEUS_HOST:-127.0.0.1}
PROMETHEUS_PORT=${CHAINLAT_PROMETHEUS_PORT:-9090}
SCRAPE_INTERVAL=${CHAINLAT_PROMETHEUS_SCRAPE_INTERVAL:-15s}
PROMETHEUS_RULES=${CHAINLAT_PROMETHEUS_RULES:-}
# Jaeger's web UI: a built jaeger-ui directory (its index.html and static/).
JAEGER_UI=${CHAINLAT_JAEGER_UI:-}

log() { echo "run.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# Builds on first use (several minutes cold), then answers from the cache.
binary() {
  case $1 in
    jaeger) "$HERE/build.sh" --print jaeger ;;
    prometheus) "$HERE/build.sh" --print prometheus | sed -n 1p ;;
    *) "$HERE/build.sh" --print otelcol ;;
  esac
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

replica_index() { [[ $1 =~ ^replica-([1-9][0-9]*)$ ]] && echo "${BASH_REMATCH[1]}"; }
replica_port() { echo $(( REPLICA_BASE_PORT + 10 * ($1 - 1) + $2 )); }

# The argument in NAME's command line that says it is ours (its config).
marker_of() {
  case $1 in
    jaeger) echo "--config=$HERE/jaeger.yaml" ;;
    collector | replica-*) echo "--config=$HERE/otelcol.yaml" ;;
    lb) echo "--config=$HERE/otelcol-lb.yaml" ;;
    prometheus) echo "--config.file=$RUN_DIR/prometheus.yml" ;;
  esac
}

# The pid in NAME's pid file, if that process is still the one we started.
running_pid() {
  local file pid
  file=$(pid_file "$1")
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ -r /proc/$pid/cmdline ]] || return 1
  # Guards against a recycled pid: the process must still run our config.
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$(marker_of "$1")" || return 1
  echo "$pid"
}

# NAME=VALUE settings a process runs with, beyond the exported defaults.
env_of() {
  local k list="" h
  case $1 in
    replica-*)
      k=$(replica_index "$1")
      echo "CHAINLAT_COLLECTOR_OTLP_GRPC_PORT=$(replica_port "$k" 0)"
      echo "CHAINLAT_COLLECTOR_OTLP_HTTP_PORT=$(replica_port "$k" 1)"
      echo "CHAINLAT_COLLECTOR_PROMETHEUS_PORT=$(replica_port "$k" 2)"
      echo "CHAINLAT_COLLECTOR_METRICS_PORT=$(replica_port "$k" 3)"
      echo "CHAINLAT_COLLECTOR_HEALTH_PORT=$(replica_port "$k" 4)"
      ;;
    lb)
      h=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
      for k in $(seq 1 "$SAMPLING_REPLICAS"); do
        list+="${list:+, }$h:$(replica_port "$k" 0)"
      done
      echo "CHAINLAT_LB_BACKENDS=[$list]"
      ;;
    *) echo "CHAINLAT_RUN_NAME=$1" ;;
  esac
}

args_of() {
  case $1 in
    jaeger) echo "--config=$HERE/jaeger.yaml" ;;
    collector | replica-*) echo "--config=$HERE/otelcol.yaml --feature-gates=$FEATURE_GATES" ;;
    lb) echo "--config=$HERE/otelcol-lb.yaml" ;;
    prometheus)
      echo "--config.file=$RUN_DIR/prometheus.yml --storage.tsdb.path=$RUN_DIR/prometheus-data" \
        "--web.listen-address=$PROMETHEUS_HOST:$PROMETHEUS_PORT --web.enable-lifecycle"
      ;;
  esac
}

# Ports a process must listen on before it counts as ready. Receivers start last in a
# Collector, so an open OTLP port means the whole pipeline is up.
ready_ports() {
  local h k
  case $1 in
    jaeger)
      h=$(dial_host "$CHAINLAT_JAEGER_HOST")
      echo "$h:$CHAINLAT_JAEGER_QUERY_PORT $h:$CHAINLAT_JAEGER_OTLP_GRPC_PORT $h:$CHAINLAT_JAEGER_OTLP_HTTP_PORT"
      ;;
    collector)
      h=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
      echo "$h:$CHAINLAT_COLLECTOR_PROMETHEUS_PORT $h:$CHAINLAT_COLLECTOR_OTLP_GRPC_PORT $h:$CHAINLAT_COLLECTOR_OTLP_HTTP_PORT"
      ;;
    replica-*)
      h=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
      k=$(replica_index "$1")
      echo "$h:$(replica_port "$k" 2) $h:$(replica_port "$k" 0) $h:$(replica_port "$k" 1)"
      ;;
    lb)
      h=$(dial_host "$CHAINLAT_LB_HOST")
      echo "$h:$CHAINLAT_LB_OTLP_GRPC_PORT $h:$CHAINLAT_LB_OTLP_HTTP_PORT"
      ;;
    prometheus) echo "$(dial_host "$PROMETHEUS_HOST"):$PROMETHEUS_PORT" ;;
  esac
}

# Prometheus's config: scrape the span metrics of every sampling Collector (the
# replicas of the tier, and the single collector when it runs), evaluate the rules file.
write_prometheus_config() {
  local h targets="" own k rules
  h=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
  if running_pid collector >/dev/null; then
    targets="'$h:$CHAINLAT_COLLECTOR_PROMETHEUS_PORT'"
  fi
  for k in $(seq 1 "$SAMPLING_REPLICAS"); do
    targets+="${targets:+, }'$h:$(replica_port "$k" 2)'"
  done
  # The Collectors' own metrics: what each accepted, decided on, sent and lost, kept
  # in Prometheus beyond a process that stops or dies.
  own="'$(dial_host "$CHAINLAT_LB_HOST"):$CHAINLAT_LB_METRICS_PORT'"
  if running_pid collector >/dev/null; then
    own+=", '$h:$CHAINLAT_COLLECTOR_METRICS_PORT'"
  fi
  for k in $(seq 1 "$SAMPLING_REPLICAS"); do
    own+=", '$h:$(replica_port "$k" 3)'"
  done
  {
    echo "global:"
    echo "  scrape_interval: $SCRAPE_INTERVAL"
    echo "  evaluation_interval: $SCRAPE_INTERVAL"
    # The tier's own loss accounting, always; the budget rules when given.
    rules="'$HERE/rules/tier-losses.yml'"
    if [[ -n $PROMETHEUS_RULES ]]; then
      [[ -f $PROMETHEUS_RULES ]] || die "CHAINLAT_PROMETHEUS_RULES: no such file: $PROMETHEUS_RULES"
      rules+=", '$(cd "$(dirname "$PROMETHEUS_RULES")" && pwd)/$(basename "$PROMETHEUS_RULES")'"
    fi
    echo "rule_files: [$rules]"
    echo "scrape_configs:"
    echo "  - job_name: chainlat-spanmetrics"
    # The Collector's exporter sets job and instance from the applications' resources.
    echo "    honor_labels: true"
    echo "    static_configs:"
    echo "      - targets: [$targets]"
    echo "  - job_name: chainlat-collectors"
    # Plain label names: the Collectors' service.instance.id arrives as service_instance_id.
    echo "    metric_name_validation_scheme: legacy"
    echo "    static_configs:"
    echo "      - targets: [$own]"
  } >"$RUN_DIR/prometheus.yml"
}

# The built UI Jaeger is to serve: CHAINLAT_JAEGER_UI, else the one `build.sh jaeger-ui`
# left in its cache; nothing (the binary's placeholder page) without either.
jaeger_ui_dir() {
  local dir=$JAEGER_UI
  if [[ -n $dir ]]; then
    [[ -f $dir/index.html ]] ||
      die "CHAINLAT_JAEGER_UI=$dir holds no built UI (index.html); build one with collector/build.sh jaeger-ui"
    (cd "$dir" && pwd)
  else
    "$HERE/build.sh" --check jaeger-ui 2>/dev/null || true
  fi
}

start_one() {
  local name=$1 bin pid log_file deadline addr marker ui
  local -a settings extra
  if pid=$(running_pid "$name"); then
    log "$name already running (pid $pid)"
    return 0
  fi
  bin=$(binary "$name")
  log_file="$RUN_DIR/$name.log"
  for addr in $(ready_ports "$name"); do
    ! port_open "${addr%:*}" "${addr##*:}" || die "$name: $addr is already in use"
  done
  if [[ $name == prometheus ]]; then write_prometheus_config; fi
  if [[ $name == jaeger ]]; then mkdir -p "$CHAINLAT_JAEGER_DATA_DIR"; fi
  marker=$(marker_of "$name")
  mapfile -t settings < <(env_of "$name")
  extra=()
  if [[ $name == jaeger ]]; then
    ui=$(jaeger_ui_dir) || exit 1
    if [[ -n $ui ]]; then
      # Set on the command line, and only when there is a UI, so that jaeger.yaml stays
      # valid alone: the configs give every ${env:...} a non-empty default, and an empty
      # assets_path would mean the UI compiled into the binary anyway.
      extra=("--set=extensions::jaeger_query::ui::assets_path=$ui")
      log "jaeger serves the Jaeger UI from $ui"
    else
      log "jaeger serves a placeholder page at / (a binary built from Go modules has no UI; the API is complete)"
      log "for the real UI: collector/build.sh jaeger-ui, or CHAINLAT_JAEGER_UI=DIR of a built jaeger-ui"
    fi
  fi
  # env and nohup exec the binary, so $! is its pid; it outlives this script.
  # shellcheck disable=SC2046
  env "${settings[@]}" nohup "$bin" $(args_of "$name") "${extra[@]}" >"$log_file" 2>&1 </dev/null &
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
    ' watch "$CHAINLAT_STOP_WITH_PID" "$pid" "$marker" >/dev/null 2>&1 </dev/null &
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

replicas() {
  local k
  for k in $(seq 1 "$SAMPLING_REPLICAS"); do echo "replica-$k"; done
}

# Names in start order: each after what it sends to.
which_ones() {
  case ${1:-all} in
    all) echo jaeger collector ;;
    tier) echo jaeger $(replicas) lb prometheus ;;
    jaeger | collector | lb | prometheus) echo "$1" ;;
    replica-*)
      [[ -n $(replica_index "$1") ]] || die "unknown process '$1'"
      echo "$1"
      ;;
    *) die "unknown process '$1' (all, tier, jaeger, collector, replica-K, lb, prometheus)" ;;
  esac
}

print_endpoints() {
  local jh ch lh
  jh=$(dial_host "$CHAINLAT_JAEGER_HOST")
  ch=$(dial_host "$CHAINLAT_COLLECTOR_HOST")
  lh=$(dial_host "$CHAINLAT_LB_HOST")
  if [[ $1 == tier ]]; then
    echo "load balancer OTLP HTTP  http://$lh:$CHAINLAT_LB_OTLP_HTTP_PORT   (OTEL_EXPORTER_OTLP_ENDPOINT)"
    echo "load balancer OTLP gRPC  $lh:$CHAINLAT_LB_OTLP_GRPC_PORT"
    echo "Prometheus               http://$(dial_host "$PROMETHEUS_HOST"):$PROMETHEUS_PORT   (alerts: /api/v1/alerts)"
    echo "Jaeger query API/UI      http://$jh:$CHAINLAT_JAEGER_QUERY_PORT"
  else
    echo "collector OTLP HTTP   http://$ch:$CHAINLAT_COLLECTOR_OTLP_HTTP_PORT   (OTEL_EXPORTER_OTLP_ENDPOINT)"
    echo "collector OTLP gRPC   $ch:$CHAINLAT_COLLECTOR_OTLP_GRPC_PORT"
    echo "span metrics          http://$ch:$CHAINLAT_COLLECTOR_PROMETHEUS_PORT/metrics"
    echo "Jaeger query API/UI   http://$jh:$CHAINLAT_JAEGER_QUERY_PORT"
  fi
}

validate_one() {
  local config=$1 bin errors
  errors=$(mktemp)
  case $(basename "$config") in
    otelcol*.yaml) bin=$(binary collector) ;;
    *) bin=$(binary jaeger) ;;
  esac
  if "$bin" validate "--config=$config" >/dev/null 2>"$errors"; then
    echo "ok       $config"
    rm -f "$errors"
  else
    # The binary logs start-up lines too; the reason is in the last ones.
    tail -n 5 "$errors" >&2
    rm -f "$errors"
    echo "INVALID  $config"
    return 1
  fi
}

cmd=${1:-}
shift || true
case $cmd in
  start)
    names=$(which_ones "${1:-all}")
    mkdir -p "$RUN_DIR"
    for name in ${1:-all} $names; do save_settings "$RUN_DIR/$name.env"; done
    for name in $names; do start_one "$name"; done
    case ${1:-all} in all | tier) print_endpoints "${1:-all}" ;; esac
    ;;
  stop)
    names=$(which_ones "${1:-all}")
    # The senders first, so they can flush to receivers that still listen.
    for name in $(echo "$names" | tr ' ' '\n' | tac); do stop_one "$name"; done
    ;;
  status)
    for name in jaeger collector $(replicas) lb prometheus; do
      if pid=$(running_pid "$name"); then echo "$name running (pid $pid)"; else echo "$name stopped"; fi
    done
    ;;
  validate)
    (( $# )) || set -- "$HERE/otelcol.yaml" "$HERE/otelcol-lb.yaml" "$HERE/jaeger.yaml" \
      "$HERE"/storage/*.yaml
    failed=0
    for config in "$@"; do validate_one "$config" || failed=1; done
    exit "$failed"
    ;;
  *)
    # The header comment, to its end.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
    ;;
esac
