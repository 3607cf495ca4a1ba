"""The contracts every stage shares (``StageOutput``, ``Decision``, ``GENRES``), content
hashing, the one strict YAML loader, paths, settings, SQL files and report export.
Imports nothing else of essaybench.
"""
