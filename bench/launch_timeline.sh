#!/usr/bin/env bash
# Where a launch's time goes (docs/launch.md): runs `FASTPMI -n N PROGRAM`
# RUNS times with the launcher's start-up log (FASTPMI_LOG=fastpmi::startup=debug)
# and prints, for each step, the mean time since the launcher began and the
# mean time since the step before (microseconds). Repeated steps (one per
# rank) are numbered in the order they came.
#
#   bench/launch_timeline.sh FASTPMI N RUNS [PROGRAM [ARGS...]]
#
# PROGRAM defaults to a trivial C program (`int main(void){return 0;}`).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0"; exit 2; }
fastpmi=$1 n=$2 runs=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -eq 0 ]; then
    printf 'int main(void){return 0;}\n' > "$work/trivial.c"
    cc -O2 -o "$work/trivial" "$work/trivial.c"
    set -- "$work/trivial"
fi
for ((i = 0; i < runs; i++)); do
    FASTPMI_LOG=fastpmi::startup=debug NO_COLOR=1 "$fastpmi" -n "$n" "$@" 2>&1 >/dev/null |
        sed -n 's/.*DEBUG \(.*\) us=\([0-9]*\)$/\1\t\2/p'
    echo END
done | awk -F'\t' '
    $0 == "END" { delete seen; next }
    {
        k = $1; c = ++seen[k]; if (c > 1) k = k " #" c
        if (!(k in sum)) order[++m] = k
        sum[k] += $2; cnt[k]++
    }
    END {
        printf "%-45s %10s %10s\n", "step", "at (us)", "+ (us)"
        prev = 0
        for (i = 1; i <= m; i++) {
            k = order[i]; at = sum[k] / cnt[k]
            printf "%-45s %10.0f %10.0f\n", k, at, at - prev
            prev = at
        }
    }'
