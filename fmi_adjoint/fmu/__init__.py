"""FMU export: C code of the model and the HHT runtime (FMU issues)."""
