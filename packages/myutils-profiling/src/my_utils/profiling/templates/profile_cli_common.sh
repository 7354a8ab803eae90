#!/usr/bin/env bash
# profile_cli_common.sh: shared launcher functions of my_utils profiling (source it, bash >= 4.3).
#
#   profile_prepare PRESET.env        read a preset (the environment overrides it) and build
#                                     PROFILE_SETTINGS, the framework arguments:
#                                     --torch_profiler.*, --nsys_profiler.*, --profiling_env.*,
#                                     --nsys_launch.* (parsed by my_utils.profiling.launch_args)
#   profile_wrap_exec_with_nsys NAME  prefix the array variable NAME with `nsys profile ...`
#                                     when the nsys backend is selected; unchanged otherwise
#
# Environment overrides: NSYS_START_STEP, NSYS_STOP_STEP, NSYS_OUTPUT_DIR, NSYS_OUTPUT_PREFIX
# (default train_rank_%q{RANK}), NSYS_GPU_METRICS_DEVICES, NSYS_TRACE, NSYS_CAPTURE_RANGE,
# NSYS_EXTRA_ARGS, TORCH_PROFILER_*, PROFILING_ENV ("KEY=VALUE KEY2=VALUE2"), PROFILE_BACKEND.
# Output names end with a suffix such as step_10_20_cap_cudaProfilerApi_with_metrics_0.
# Safe under `set -euo pipefail`.

_profile_die() {
    # prints only: callers `return` their own status (under `set -e` a failing echo helper
    # would end the script with the wrong code)
    echo "profile_cli_common.sh: $*" >&2
}

_profile_is_int() {
    [[ "${1:-}" =~ ^[0-9]+$ ]]
}

_profile_bool() {
    case "${1,,}" in
        1|true|yes|on) echo true ;;
        0|false|no|off|"") echo false ;;
        *) return 1 ;;
    esac
}

profile_output_suffix() {
    # step_<start>_<stop>_cap_<capture range>_with_metrics_<devices> (or _no_metrics)
    local devices="${NSYS_GPU_METRICS_DEVICES:-none}" metrics
    if [[ -z "$devices" || "$devices" == "none" ]]; then
        metrics="no_metrics"
    else
        metrics="with_metrics_${devices//,/-}"
    fi
    echo "step_${NSYS_START_STEP}_${NSYS_STOP_STEP}_cap_${NSYS_CAPTURE_RANGE}_${metrics}"
}

profile_prepare() {
    local preset="${1:-}"
    if [[ -n "$preset" ]]; then
        [[ -f "$preset" ]] || { _profile_die "profile_prepare: preset file not found: $preset"; return 2; }
        # shellcheck disable=SC1090
        source "$preset"
    fi
    PROFILE_BACKEND="${PROFILE_BACKEND:-none}"
    NSYS_START_STEP="${NSYS_START_STEP:-10}"
    NSYS_STOP_STEP="${NSYS_STOP_STEP:-20}"
    NSYS_OUTPUT_DIR="${NSYS_OUTPUT_DIR:-./logs/nsys}"
    if [[ -z "${NSYS_OUTPUT_PREFIX:-}" ]]; then
        NSYS_OUTPUT_PREFIX='train_rank_%q{RANK}'
    fi
    NSYS_TRACE="${NSYS_TRACE:-cuda,nvtx}"
    NSYS_CAPTURE_RANGE="${NSYS_CAPTURE_RANGE:-cudaProfilerApi}"
    NSYS_GPU_METRICS_DEVICES="${NSYS_GPU_METRICS_DEVICES:-none}"
    NSYS_EXTRA_ARGS="${NSYS_EXTRA_ARGS:-}"
    PROFILING_ENV="${PROFILING_ENV:-}"

    PROFILE_SETTINGS=()
    local item
    for item in $PROFILING_ENV; do
        [[ "$item" == *=* ]] || { _profile_die "PROFILING_ENV entry '$item' is not KEY=VALUE"; return 2; }
        PROFILE_SETTINGS+=("--profiling_env.${item%%=*}=${item#*=}")
    done

    case "$PROFILE_BACKEND" in
        nsys)
            _profile_is_int "$NSYS_START_STEP" || { _profile_die "NSYS_START_STEP='$NSYS_START_STEP' is not a step number"; return 2; }
            _profile_is_int "$NSYS_STOP_STEP" || { _profile_die "NSYS_STOP_STEP='$NSYS_STOP_STEP' is not a step number"; return 2; }
            (( NSYS_STOP_STEP > NSYS_START_STEP )) || { _profile_die "NSYS_STOP_STEP ($NSYS_STOP_STEP) must be greater than NSYS_START_STEP ($NSYS_START_STEP)"; return 2; }
            PROFILE_OUTPUT_SUFFIX="$(profile_output_suffix)"
            PROFILE_OUTPUT="${NSYS_OUTPUT_DIR}/${NSYS_OUTPUT_PREFIX}_${PROFILE_OUTPUT_SUFFIX}"
            PROFILE_SETTINGS+=(
                "--nsys_profiler.enable=true"
                "--nsys_profiler.start_step=${NSYS_START_STEP}"
                "--nsys_profiler.stop_step=${NSYS_STOP_STEP}"
                "--nsys_profiler.capture_range=${NSYS_CAPTURE_RANGE}"
                "--nsys_profiler.output=${PROFILE_OUTPUT}"
                "--nsys_launch.trace=${NSYS_TRACE}"
                "--nsys_launch.gpu_metrics_devices=${NSYS_GPU_METRICS_DEVICES}"
                "--nsys_launch.output_dir=${NSYS_OUTPUT_DIR}"
                "--torch_profiler.enable=false"
            )
            ;;
        torch_profiler)
            local start="${TORCH_PROFILER_START_STEP:-5}" stop="${TORCH_PROFILER_STOP_STEP:-8}" flag value
            _profile_is_int "$start" || { _profile_die "TORCH_PROFILER_START_STEP='$start' is not a step number"; return 2; }
            _profile_is_int "$stop" || { _profile_die "TORCH_PROFILER_STOP_STEP='$stop' is not a step number"; return 2; }
            (( stop > start )) || { _profile_die "TORCH_PROFILER_STOP_STEP ($stop) must be greater than TORCH_PROFILER_START_STEP ($start)"; return 2; }
            PROFILE_SETTINGS+=(
                "--torch_profiler.enable=true"
                "--torch_profiler.start_step=${start}"
                "--torch_profiler.stop_step=${stop}"
                "--torch_profiler.output_dir=${TORCH_PROFILER_OUTPUT_DIR:-./logs/torch_profiler}"
            )
            for flag in RECORD_SHAPES PROFILE_MEMORY WITH_STACK; do
                local var="TORCH_PROFILER_${flag}"
                value="$(_profile_bool "${!var:-false}")" || { _profile_die "${var}='${!var}' is not true/false"; return 2; }
                PROFILE_SETTINGS+=("--torch_profiler.${flag,,}=${value}")
            done
            PROFILE_SETTINGS+=("--nsys_profiler.enable=false")
            ;;
        none|disabled|"")
            PROFILE_SETTINGS+=("--torch_profiler.enable=false" "--nsys_profiler.enable=false")
            ;;
        *)
            _profile_die "PROFILE_BACKEND='$PROFILE_BACKEND' is not one of nsys, torch_profiler, none"
            return 2
            ;;
    esac
    export PROFILE_BACKEND
}

profile_wrap_exec_with_nsys() {
    local name="${1:-}"
    [[ -n "$name" ]] || { _profile_die "profile_wrap_exec_with_nsys: give the NAME of the command array"; return 2; }
    declare -p "$name" >/dev/null 2>&1 || { _profile_die "profile_wrap_exec_with_nsys: no array named '$name'"; return 2; }
    [[ "${PROFILE_BACKEND:-none}" == "nsys" ]] || return 0
    [[ -n "${PROFILE_OUTPUT:-}" ]] || { _profile_die "profile_wrap_exec_with_nsys: call profile_prepare first"; return 2; }
    command -v nsys >/dev/null 2>&1 || { _profile_die "nsys not found on PATH: install Nsight Systems or use preset_disabled.env"; return 127; }
    local -n _profile_cmd="$name"
    local -a prefix=(nsys profile
        "--trace=${NSYS_TRACE}"
        "--capture-range=${NSYS_CAPTURE_RANGE}"
        "--capture-range-end=stop"
        "--output=${PROFILE_OUTPUT}"
        "--force-overwrite=true")
    if [[ -n "${NSYS_GPU_METRICS_DEVICES}" && "${NSYS_GPU_METRICS_DEVICES}" != "none" ]]; then
        prefix+=("--gpu-metrics-devices=${NSYS_GPU_METRICS_DEVICES}")
    fi
    if [[ -n "${NSYS_EXTRA_ARGS}" ]]; then
        local -a extra
        read -r -a extra <<< "${NSYS_EXTRA_ARGS}"
        prefix+=("${extra[@]}")
    fi
    mkdir -p "${NSYS_OUTPUT_DIR}"
    _profile_cmd=("${prefix[@]}" "${_profile_cmd[@]}")
}
