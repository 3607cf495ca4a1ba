"""The files essaybench ships and reads: ``sql/``, ``rubrics/``, ``configs/`` and the
bundled sample ``data/`` (relative links to the repository's top-level folders; the wheel
holds copies). Read them through ``essaybench.core.paths.resource``."""
