"""Cheap signals between weekly judgments, computed without a judge call: output drift
(this week's essay against the last comparable run's on the same prompt, per model,
against the model's own history band) and relevance (does the essay share the prompt's
topic words, or did it answer a different question). Pure: frames in, typed records out.
"""
