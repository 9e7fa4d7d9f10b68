#!/usr/bin/env bash
# Re-capture the spawn transcripts of this directory: build the spawn test
# programs with each stack, run them under the stack's own launcher inside
# strace, and split the PMI traffic per rank with extract.py.
# Usage: tests/vectors/spawn/capture.sh WORKDIR   (WORKDIR: an empty scratch
# directory; its path appears in the transcripts' execname and wdir values)
# Needs strace, the venvs of scripts/install-mpi-stacks, Debian's mpich
# (mpiexec.hydra, Hydra 4.0.2) and libpmi2-0-dev.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venvs="${FASTPMI_VENVS:-$repo/target/venvs}"
M="$venvs/mpich5" I="$venvs/impi"
work="$1"
mkdir -p "$work"
cd "$work"
src="$repo/tests/c"

"$M/bin/mpicc" -O2 -o sp5 "$src/spawn_parent.c" -Wl,-rpath,"$M/lib"
"$M/bin/mpicc" -O2 -o sm5 "$src/spawn_multiple.c" -Wl,-rpath,"$M/lib"
"$M/bin/mpicc" -O2 -o np5 "$src/nameserv_pub.c" -Wl,-rpath,"$M/lib"
for p in spawn_parent:spi spawn_multiple:smi; do
  gcc -O2 -I"$I/include" -o "${p#*:}" "$src/${p%:*}.c" -L"$I/lib" -lmpi -Wl,-rpath,"$I/lib"
done
gcc -O2 -I/usr/include/slurm -o ps2 "$src/pmi2_spawn.c" -lpmi2

trace() { # trace NAME PROGRAM LAUNCHER...
  local name=$1 prog=$2
  shift 2
  strace -f -qq -v -s 1000000 -e trace=execve,read,write -o "raw_$name.txt" "$@"
  python3 "$here/extract.py" "raw_$name.txt" "$prog" "$here/$name"
}

# The mpich wheel speaks PMI-1 only: MPIR_CVAR_PMI_VERSION=2 fails MPI_Init
# before any PMI traffic, under Hydra 5 and fastpmi alike.
trace spawn_mpich5_pmi1 sp5 "$M/bin/mpiexec" -n 2 ./sp5 2
trace spawn_multiple_mpich5_pmi1 sm5 "$M/bin/mpiexec" -n 1 ./sm5 1 2
MPIR_CVAR_CH4_NETMOD=ofi trace nameserv_mpich5_pmi1 np5 "$M/bin/mpiexec" -n 1 ./np5 fastpmi-svc
I_MPI_FABRICS=shm:ofi FI_PROVIDER=tcp trace spawn_impi_pmi1 spi "$I/bin/mpiexec.hydra" -n 2 ./spi 2
I_MPI_FABRICS=shm:ofi FI_PROVIDER=tcp \
  trace spawn_multiple_impi_pmi1 smi "$I/bin/mpiexec.hydra" -n 1 ./smi 1 2
trace spawn_slurmpmi2_hydra4 ps2 mpiexec.hydra -n 2 ./ps2 2
