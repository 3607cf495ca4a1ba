"""Prefect flows: one per stage (the file name is the stage name) plus pipelines.

Log redaction is installed by ``tasks`` (see its docstring), which every flow imports."""
