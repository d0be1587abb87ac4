"""Control: what clients and operators do to runs: create them and append steps (``create``),
complete, cancel and resume them (``lifecycle``), fork them from a checkpoint (``fork``)."""
