"""fastpmi: the PMI bootstrap of a parallel job (a rank, a size, a
key-value exchange with a fence) for Python, without an MPI library.

Under ``fastpmi -n N python prog.py`` the exchange goes through the job's
shared memory; under another PMI-2 launcher (Hydra, Slurm) over its socket;
without a launcher the process is a singleton (rank 0 of 1)::

    import fastpmi
    pmi = fastpmi.Pmi()
    pmi.put("addr", my_address)
    pmi.fence()
    peers = [pmi.get("addr", rank=r) for r in range(pmi.size)]
    pmi.finalize()
"""

from fastpmi._fastpmi import Pmi, __version__
from fastpmi import errors
from fastpmi.errors import *  # noqa: F401,F403  (the exceptions, at the top)

__all__ = ["Pmi", "__version__", *errors.__all__]
