"""The Python address exchange under fastpmi (fastpmi-bench, configuration
python@fastpmi): every rank puts its address under its own key, fences,
gets every rank's and checks it; rank 0 prints
``python-exchange ok size=N`` when all ranks' are right (any rank that
finds a wrong one exits 1). Run as ``fastpmi -n N python pmi_exchange.py``."""
import sys

import fastpmi


def address(rank):
    return f"10.{rank >> 16 & 255}.{rank >> 8 & 255}.{rank & 255}:{5000 + rank % 60000}"


pmi = fastpmi.Pmi()
rank, size = pmi.rank, pmi.size
pmi.put(f"addr-{rank}", address(rank))
pmi.fence()
for r in range(size):
    got = pmi.get(f"addr-{r}", rank=r)
    if got != address(r).encode():
        sys.exit(f"rank {rank}: addr-{r} is {got!r}, not {address(r)!r}")
if rank == 0:
    print(f"python-exchange ok size={size} transport={pmi.transport}", flush=True)
pmi.finalize()
