"""Each rank puts its address, fences and reads every rank's: prints
`exchange ok RANK SIZE TRANSPORT` when all are right."""
import sys

import fastpmi

want = sys.argv[1] if len(sys.argv) > 1 else None
pmi = fastpmi.Pmi()
if want is not None and pmi.transport != want:
    sys.exit(f"rank {pmi.rank}: transport {pmi.transport}, not {want}")
pmi.put(f"addr-{pmi.rank}", f"10.0.{pmi.rank // 256}.{pmi.rank % 256}:{5000 + pmi.rank}")
pmi.fence()
for r in range(pmi.size):
    v = pmi.get(f"addr-{r}", rank=r)
    if v != f"10.0.{r // 256}.{r % 256}:{5000 + r}".encode():
        sys.exit(f"rank {pmi.rank}: addr-{r} is {v!r}")
if pmi.get("addr-none") is not None:
    sys.exit(f"rank {pmi.rank}: a key nobody put was found")
print(f"exchange ok {pmi.rank} {pmi.size} {pmi.transport}", flush=True)
pmi.finalize()
