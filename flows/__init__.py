"""Prefect flows: one per stage (the file name is the stage name) plus pipelines."""
