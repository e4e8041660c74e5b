"""`fleetops report --html`: a static, self-contained site of runs, hosts and (through views
that other packages contribute) fleet health, readable offline from a file:// URL."""
