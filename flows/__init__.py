"""Prefect flows: one per stage (the file name is the stage name) plus pipelines.

Installed as ``essaybench.flows`` (the link essaybench/flows; prefect.yaml's entrypoints
are ``essaybench.flows.<stage>:<stage>_flow``). Log redaction is installed by
``essaybench.tasks`` (see its docstring), which every flow imports."""
