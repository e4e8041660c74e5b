"""Payload of the hermes_swap module: put the verified new file in place (action swap), or
finish or undo an interrupted swap (action recover)."""
from fleetops.remote.hermes import image_swap


def main(args):
    """{action?: swap|recover, hermes_home?, profile?, new_db?, quarantine_dir?, expect_sha256?,
    prefer?: finish|rollback, force?, run_id?, _check?}."""
    action = (args or {}).get("action") or "swap"
    if action not in ("swap", "recover"):
        return {"changed": False, "failed": True, "skipped": False, "msg": "unknown action %r" % action}
    return image_swap.run(args, action)
