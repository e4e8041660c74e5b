"""Generic host helpers and payloads: facts, files, cron, user units, the host lock."""
