"""``python -m essaybench.cli``: the same as the ``essaybench`` command."""

from essaybench.cli import app

app()
