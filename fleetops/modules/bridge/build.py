"""A module and its arguments packed by ansible-core itself: `modify_module` builds the AnsiballZ
wrapper (the module, the module_utils it imports, the arguments) that pipelining sends to the
host python's stdin; the `_ansible_*` arguments are the ones ansible-core's action base adds."""
from __future__ import annotations

import threading

# the module's remote_tmp: a directory the host payload makes (0700) and removes afterwards,
# named in the environment it gives the module (AnsibleModule expands variables in it)
TMP_VAR = "FLEETOPS_ANSIBLE_TMP"
# module_common caches the packed module in a file and takes a lock of its own per process;
# fleetops' forks are threads, so one build at a time
_lock = threading.Lock()


def module_args(found, args: dict, check: bool, diff: bool, no_log: bool) -> dict:
    """The task's arguments plus what ansible-core's ActionBase._update_module_args adds."""
    from ansible import constants as C
    from ansible.module_utils._internal import _traceback
    out = dict(args)
    out.update({
        "_ansible_check_mode": bool(check),
        "_ansible_no_log": bool(no_log) or bool(C.config.get_config_value("DEFAULT_NO_TARGET_SYSLOG")),
        "_ansible_debug": bool(C.DEFAULT_DEBUG),
        "_ansible_diff": bool(diff),
        "_ansible_verbosity": 0,
        "_ansible_version": found.version,
        "_ansible_module_name": found.name,
        "_ansible_syslog_facility": C.DEFAULT_SYSLOG_FACILITY,
        "_ansible_selinux_special_fs": C.DEFAULT_SELINUX_SPECIAL_FS,
        "_ansible_socket": None,
        "_ansible_shell_executable": "/bin/sh",
        "_ansible_keep_remote_files": False,
        "_ansible_tmpdir": None,
        "_ansible_remote_tmp": "$" + TMP_VAR,
        "_ansible_ignore_unknown_opts": False,
        "_ansible_target_log_info": C.config.get_config_value("TARGET_LOG_INFO"),
        "_ansible_tracebacks_for": _traceback.traceback_for(),
    })
    return out


def wrapper(found, margs: dict, python: str | None) -> tuple[str, str]:
    """(module style, the AnsiballZ wrapper's source) for `found` called with `margs`."""
    from ansible import constants as C
    from ansible.parsing.dataloader import DataLoader
    from ansible.executor.module_common import modify_module
    from ansible.template import Templar
    task_vars = {"ansible_python_interpreter": python or "/usr/bin/python3"}
    with _lock:
        built = modify_module(module_name=found.name, module_path=found.path, module_args=margs,
                              templar=Templar(loader=DataLoader(), variables=task_vars), task_vars=task_vars,
                              module_compression=C.DEFAULT_MODULE_COMPRESSION)
    return built.module_style, built.b_module_data.decode("utf-8")
