"""The Python address exchange under an MPI launcher (fastpmi-bench,
configuration python@mpiexec): every rank gives its address to
``MPI.COMM_WORLD.allgather`` and checks every rank's; rank 0 prints
``python-exchange ok size=N`` when all ranks' are right (any rank that
finds a wrong one exits 1). Run as ``mpiexec -n N python
mpi4py_allgather.py`` (mpi4py initialises MPI on import and finalises it
at exit)."""
import sys

from mpi4py import MPI


def address(rank):
    return f"10.{rank >> 16 & 255}.{rank >> 8 & 255}.{rank & 255}:{5000 + rank % 60000}"


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
got = comm.allgather(address(rank))
for r in range(size):
    if got[r] != address(r):
        sys.exit(f"rank {rank}: address {r} is {got[r]!r}, not {address(r)!r}")
if rank == 0:
    print(f"python-exchange ok size={size}", flush=True)
