"""One module per stage, named as the stage, its flow (``flows/<stage>.py``) and its
snapshot: each reads its upstream snapshot from the store, calls the library and
writes its own snapshot and catalog row. ``curate`` and ``pipeline`` chain them.
"""
