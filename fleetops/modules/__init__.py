"""Controller-side generic modules: one file each, listed in `registry.GENERIC`.

A module receives rendered arguments and a TaskContext and returns the module
contract: {changed, failed, skipped, msg, ...}. Host-side work goes through
ctx.payload(...), which runs a stdlib-only file from fleetops.remote on the host.
"""
