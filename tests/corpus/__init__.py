"""Test corpus: realistic Hermes state.db files (built with the real hermes-agent) and
byte-level damage cases with exact ground truth. Independent of fleetops: never import it here."""
