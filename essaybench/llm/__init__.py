"""The LLM gateway: every call the pipeline makes goes through here.

``types`` holds the records; ``registry`` the validated model config; ``client``
the one narrow backend interface and its OpenAI-compatible implementation;
``ledger`` the durable DuckDB call ledger; ``gateway`` ties them together;
``fake/`` is a real HTTP test double (tests only); ``embedded`` manages the local model.
"""
