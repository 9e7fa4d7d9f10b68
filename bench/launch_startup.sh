#!/usr/bin/env bash
# Job start-up against the posix_spawn floor (docs/launch.md). Interleaved: every round
# runs each configuration once at each N; medians over the rounds; ratios to (a).
#
#   bench/launch_startup.sh FASTPMI LIBDIR ROUNDS N...
#
# FASTPMI: the launcher binary; LIBDIR: where `make install` put fastpmi's libpmi2.so.0.
# Configurations:
#   a  spawn_floor N trivial           posix_spawn + reap of N trivial processes
#   b  fastpmi -n N trivial            the launcher, no PMI
#   c  fastpmi -n N pmi2_minimal       fastpmi's libpmi2 (shared memory)
#   d  fastpmi -n N pmi2_minimal       Slurm's libpmi2 (socket)
#   e1 mpiexec.hydra -n N trivial      Hydra (Debian)
#   e2 mpiexec.hydra -n N pmi2_minimal Hydra with Slurm's libpmi2
# With FASTPMI_BASE=<another fastpmi binary> (e.g. a build of the previous release), also
#   b0, d0                             b and d with that launcher
# and with FASTPMI_BASE_LIBDIR=<that build's `make install` lib dir> too
#   c0                                 c with that launcher and its libpmi2
# LAUNCH_CONFIGS="a b b0 ..." runs only those (a, the floor, is the ratios' base).
# Needs cc, Slurm's libpmi2 (libpmi2-0-dev) and mpiexec.hydra.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,8p' "$0"; exit 2; }
fastpmi=$1 libdir=$2 rounds=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/spawn_floor" "$here/c/spawn_floor.c"
cc -O2 -I/usr/include/slurm -o "$work/pmi2_minimal" "$here/c/pmi2_minimal.c" -lpmi2
printf 'int main(void){return 0;}\n' > "$work/trivial.c"
cc -O2 -o "$work/trivial" "$work/trivial.c"
hydra=${HYDRA:-mpiexec.hydra}

# Wall time of one command in seconds ("fail" if it fails or takes over 30 s).
t() {
    local s e
    s=$(date +%s.%N)
    if timeout -k 2 30 "$@" > /dev/null 2>&1; then
        e=$(date +%s.%N)
        echo "$s $e" | awk '{printf "%.3f", $2 - $1}'
    else
        echo fail
    fi
}

run() {
    local cfg=$1 n=$2
    case $cfg in
    a) t "$work/spawn_floor" "$n" "$work/trivial" ;;
    b) t "$fastpmi" -n "$n" "$work/trivial" ;;
    c) LD_LIBRARY_PATH=$libdir t "$fastpmi" -n "$n" "$work/pmi2_minimal" ;;
    d) t "$fastpmi" -n "$n" "$work/pmi2_minimal" ;;
    e1) t "$hydra" -n "$n" "$work/trivial" ;;
    e2) t "$hydra" -n "$n" "$work/pmi2_minimal" ;;
    b0) t "$FASTPMI_BASE" -n "$n" "$work/trivial" ;;
    d0) t "$FASTPMI_BASE" -n "$n" "$work/pmi2_minimal" ;;
    c0) LD_LIBRARY_PATH=$FASTPMI_BASE_LIBDIR t "$FASTPMI_BASE" -n "$n" "$work/pmi2_minimal" ;;
    esac
}

cfgs=${LAUNCH_CONFIGS:-"a b c d e1 e2${FASTPMI_BASE:+ b0 d0}${FASTPMI_BASE_LIBDIR:+ c0}"}
declare -A times
for ((i = 0; i < rounds; i++)); do
    for n in "$@"; do
        for c in $cfgs; do
            # Hydra 4.0.2's PMI-2 hangs at 256 ranks and more: try it once.
            if [ "$c" = e2 ] && [ "$i" -gt 0 ] && [ "${times[e2.$n]}" = "fail " ]; then continue; fi
            times[$c.$n]+="$(run "$c" "$n") "
            echo "round $i N=$n $c ${times[$c.$n]}" >&2
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "fail")}'; }
printf '%-4s %6s %10s %8s  %s\n' cfg N median_s x_floor runs
for n in "$@"; do
    floor=$(echo "${times[a.$n]}" | median)
    for c in $cfgs; do
        m=$(echo "${times[$c.$n]}" | median)
        r=$(awk -v m="$m" -v f="$floor" 'BEGIN { if (m ~ /^[0-9.]+$/) printf "%.2f", m / f; else print "-" }')
        printf '%-4s %6s %10s %8s  %s\n' "$c" "$n" "$m" "$r" "${times[$c.$n]}"
    done
done
