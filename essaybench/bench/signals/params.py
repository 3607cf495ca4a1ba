"""``alerts.signals`` in the benchmark config: the drift band and the relevance threshold."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SignalParams(BaseModel):
    """Thresholds of the two judge-free signals (defaults calibrated in docs/weekly.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Compute the signals in the alerts "
                          "stage (false: neither figures nor alerts).")
    ngram: int = Field(default=3, ge=1, le=6, description="Character n-gram length of the "
                       "drift overlap.")
    drift_measure: str = Field(default="rouge_l", pattern="^(rouge_l|ngram_dice)$",
                               description="The similarity whose weekly median the band "
                               "watches (rouge_l or ngram_dice).")
    min_history: int = Field(default=4, ge=2, description="Earlier weekly medians a model "
                             "needs before its band is set (fewer: figures, no alert).")
    history_weeks: int = Field(default=12, ge=2, description="At most this many earlier "
                               "weeks make the band (the newest).")
    band_k: float = Field(default=3.0, gt=0, description="The band's lower edge: mean of the "
                          "earlier medians minus band_k standard deviations ...")
    band_min_drop: float = Field(default=0.03, ge=0, le=1, description="... and at least "
                                 "this far below the mean (a steady model's sd is tiny).")
    relevance_threshold: float = Field(default=0.03, ge=0, le=1, description="An essay "
                                       "sharing less than this share of its prompt's topic "
                                       "bigrams is flagged off-topic.")
    off_topic_rate: float = Field(default=0.10, ge=0, le=1, description="Share of a model's "
                                  "checked essays flagged off-topic that alerts.")
    embedding_model: str | None = Field(default=None, description="A registry model "
                                        "serving /v1/embeddings: median embedding cosine "
                                        "for drift and relevance, figures only (None: "
                                        "lexical only).")
    gold_file: str | None = Field(default=None, description="A gold file (reference answers "
                                  "and acceptance criteria by prompt id, bench/gold.py) "
                                  "attached to the run's prompt set and used for the "
                                  "reference-based metrics per model, secondary figures "
                                  "(None: the gold set attached with essaybench gold "
                                  "attach, if any).")
