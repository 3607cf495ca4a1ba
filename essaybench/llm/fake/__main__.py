"""``python -m essaybench.llm.fake``: serve the fake OpenAI-compatible API."""

import sys

from essaybench.llm.fake.server import main

sys.exit(main())
