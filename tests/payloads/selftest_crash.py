"""Self-test payload: prints some noise, then raises. Used by the fault suite (tests/lab/faults/)
to prove that a payload crashing on a host is reported as that host's failure, with the tail of
its traceback, and that the run goes on. Harmless: it reads and writes nothing on the host.

args: {"lines": N noise lines on stdout first (payload stdout goes to stderr), "message": text}
"""


def _deep(n, message):
    if n <= 0:
        raise RuntimeError(message)
    return _deep(n - 1, message)


def main(args):
    for i in range(int(args.get("lines") or 0)):
        print("selftest noise line %d" % i)
    _deep(3, str(args.get("message") or "selftest_crash: deliberate failure"))
    return {"changed": False}
