"""Personal data in raw records: formatted identifiers (``formatted``), person names
(``names``), and their replacement by typed placeholders (``mask``)."""

from essaybench.curate.pii.mask import (
    KINDS,
    PLACEHOLDERS,
    Deidentified,
    DeidParams,
    deidentify,
    find_personal_data,
)

__all__ = ["KINDS", "PLACEHOLDERS", "DeidParams", "Deidentified", "deidentify",
           "find_personal_data"]
