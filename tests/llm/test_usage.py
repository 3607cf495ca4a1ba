"""Reading usage blocks (llm.usage): each provider's cached-input fields, and counts
nobody could believe left unknown."""

from __future__ import annotations

from essaybench.llm.usage import ReadUsage, anthropic_usage, openai_usage


def test_openai_and_deepseek_cached_fields() -> None:
    assert openai_usage({"prompt_tokens": 100, "completion_tokens": 7,
                         "prompt_tokens_details": {"cached_tokens": 64}}) == \
        ReadUsage(100, 7, 64)
    assert openai_usage({"prompt_tokens": 100, "completion_tokens": 7,
                         "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}) == \
        ReadUsage(100, 7, 64)
    # OpenAI's field is read first; a DeepSeek pair that disagrees with the prompt is not
    assert openai_usage({"prompt_tokens": 100, "completion_tokens": 7,
                         "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 30}) == \
        ReadUsage(100, 7, None)
    assert openai_usage({"prompt_tokens": 100, "completion_tokens": 7}) == \
        ReadUsage(100, 7, None)
    assert openai_usage({}) == ReadUsage(0, 0, None)  # missing counts are 0, as before


def test_anthropic_input_is_uncached_plus_cache_reads_and_writes() -> None:
    assert anthropic_usage({"input_tokens": 20, "cache_read_input_tokens": 1000,
                            "cache_creation_input_tokens": 50, "output_tokens": 9}) == \
        ReadUsage(1070, 9, 1000)
    assert anthropic_usage({"input_tokens": 20, "output_tokens": 9}) == ReadUsage(20, 9, None)
    assert anthropic_usage({"input_tokens": "20", "output_tokens": 9}).input_tokens is None
