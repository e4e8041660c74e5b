"""The payload contract's one result builder: every payload's `main(args)` returns this dict
(changed, failed, skipped, msg, then its own keys), the shape the controller's
`fleetops.engine.module.result` builds on its side."""


def result(changed=False, failed=False, msg="", skipped=False, **extra):
    """A payload result: the four contract keys as booleans and text, then `extra`."""
    out = {"changed": bool(changed), "failed": bool(failed), "skipped": bool(skipped), "msg": msg}
    out.update(extra)
    return out
