"""The exceptions of fastpmi.Pmi: every one is a PmiError, with ``code``,
the PMI-2 error code the C library would return for it."""


class PmiError(Exception):
    """A PMI operation failed (``code``: the PMI-2 error code)."""

    code: int = -1


class NotInitialized(PmiError):
    """A call before ``init()`` (``Pmi(init=False)``)."""


class InvalidArgument(PmiError, ValueError):
    """A key or value the PMI protocol does not carry: empty, too long, with
    a character the wire forbids."""


class Finalized(PmiError):
    """A call after ``finalize()``."""


class Unsupported(PmiError):
    """The PMI server does not offer this operation."""


class ServerError(PmiError):
    """The PMI server refused the request (``rc``: its return code)."""

    rc: int = -1


class ConnectionLost(PmiError, ConnectionError):
    """The connection to the launcher failed."""


class Aborted(PmiError):
    """The job was aborted (``rank`` aborted it with ``exit_code``)."""

    rank: int = -1
    exit_code: int = -1


class RanksDied(PmiError):
    """Ranks of a fault-tolerant job died: the operation can never complete
    (``ranks``: the dead set when it gave up)."""

    ranks: "list[int]" = []


__all__ = [
    "PmiError",
    "NotInitialized",
    "InvalidArgument",
    "Finalized",
    "Unsupported",
    "ServerError",
    "ConnectionLost",
    "Aborted",
    "RanksDied",
]
