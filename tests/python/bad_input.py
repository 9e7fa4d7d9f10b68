"""Every misuse raises a clear, typed exception; prints `bad input ok`."""
import fastpmi


def raises(exc, f, *args, contains=None):
    try:
        f(*args)
    except exc as e:
        if contains is not None and contains not in str(e):
            raise AssertionError(f"{exc.__name__} without {contains!r}: {e}")
        return e
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exc.__name__}")


early = fastpmi.Pmi(init=False)
assert not early.initialized
raises(fastpmi.NotInitialized, early.get, "k", contains="init()")
raises(fastpmi.NotInitialized, early.put, "k", "v")
raises(fastpmi.NotInitialized, lambda: early.rank)

pmi = fastpmi.Pmi()
raises(TypeError, pmi.put, 7, "v", contains="key must be str or bytes, not int")
raises(TypeError, pmi.get, None, contains="not NoneType")
raises(TypeError, pmi.put, "k", 3.5, contains="value must be str or bytes")
# 16 MiB is the most fastpmi carries (its PMI-2 peers: 1024 bytes).
e = raises(fastpmi.InvalidArgument, pmi.put, "big", b"x" * (17 << 20), contains="bytes (max")
assert isinstance(e, ValueError) and isinstance(e, fastpmi.PmiError) and e.code != 0, e
raises(fastpmi.InvalidArgument, pmi.put, "k" * 200, "v")
raises(fastpmi.InvalidArgument, pmi.put, "", "v")
raises(fastpmi.InvalidArgument, pmi.put, "k", b"a\x00b", contains="NUL")
raises(fastpmi.InvalidArgument, pmi.wait_for_death, 0, -1.0)
raises(fastpmi.PmiError, pmi.init, contains="already")
pmi.put(b"bytes-key", b"\xff\xferaw")
pmi.put("str-key", "caf\u00e9")
pmi.fence()
assert pmi.get("bytes-key") == b"\xff\xferaw"
assert pmi.get(b"str-key") == "caf\u00e9".encode()
pmi.finalize()
raises(fastpmi.Finalized, pmi.get, "k")
print("bad input ok", flush=True)
