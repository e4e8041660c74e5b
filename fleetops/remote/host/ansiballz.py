"""Payload: run an ansible-core module packed on the controller (its AnsiballZ wrapper) under
this host's python, the wrapper on the interpreter's stdin as ansible-core's pipelining sends
it. The module's remote_tmp is a private directory (0700) made here and removed afterwards, so
nothing is left on the host; its stdout, stderr and exit status go back as they are."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from fleetops.remote.host.contract import result

TMP_VAR = "FLEETOPS_ANSIBLE_TMP"


def main(args: dict) -> dict:
    wrapper = args.get("wrapper")
    if not isinstance(wrapper, str) or not wrapper:
        return result(failed=True, msg="ansiballz: no module wrapper given")
    tmp = tempfile.mkdtemp(prefix="fleetops-ansible-")
    env = dict(os.environ)
    env[TMP_VAR] = tmp
    try:
        proc = subprocess.run([sys.executable or "python3"], input=wrapper.encode("utf-8"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        return result(failed=True, msg=f"cannot start {sys.executable}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return result(module_rc=proc.returncode, module_stdout=proc.stdout.decode("utf-8", "replace"),
                  module_stderr=proc.stderr.decode("utf-8", "replace"))
