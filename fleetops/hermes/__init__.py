"""Controller-side Hermes commands and modules: audit, salvage, repair."""
