"""What every command shares, the generic ones and those an extension registers: argument
types, the results target, and the secret values an error line must never show."""
from __future__ import annotations

import argparse
import os

RESULTS_HELP = ("central results: a directory holding runs.db (default ./fleetops-runs), or a postgresql:// URL; "
                "else $FLEETOPS_RESULTS")
DEFAULT_FORKS = 20          # RunOptions.forks; kept here so --help needs no engine import

# Secret values known to the current command, so even an error line cannot leak one.
SECRETS: set = set()


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def results_target(value) -> tuple:
    """(results directory, PostgreSQL URL or None) from --results, else FLEETOPS_RESULTS.

    A postgresql:// URL keeps the runs in that database; fetched files then go to
    FLEETOPS_RESULTS_FILES (default ./fleetops-runs). The URL's password is a secret from here on.
    """
    from fleetops.engine.results import DEFAULT_RESULTS_DIR
    from fleetops.engine.results_backend import is_url, url_secrets

    value = value or os.environ.get("FLEETOPS_RESULTS") or DEFAULT_RESULTS_DIR
    if is_url(value):
        SECRETS.update(url_secrets(value))
        return os.environ.get("FLEETOPS_RESULTS_FILES") or DEFAULT_RESULTS_DIR, value
    return value, None


def examples(*lines: str) -> dict:
    """add_parser keywords that end a command's --help with real examples, as git's and
    ansible-playbook's do; the docs' CLI reference is this help (tests/docs checks both)."""
    return {"epilog": "examples:\n" + "\n".join("  " + ln for ln in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}
