"""The segmenting settings a command or the server starts with, checked once before any model
is loaded: segment=, the protected spans (nmt.terms.spans.Rules) and an exact glossary on an
engine that can hold it. Each rule is its room's own; this only asks them."""

from __future__ import annotations

from nmt.config import SEGMENTS, SegmentConfig
from nmt.errors import GlossaryError, UsageError
from nmt.inference.loading import engine_class
from nmt.terms.spans import Rules


def check_segment(segment: str) -> None:
    if segment not in SEGMENTS:
        raise UsageError(f"segment must be {' or '.join(SEGMENTS)}, not {segment!r}")


def checked_rules(cfg: SegmentConfig, backend: str = "torch") -> Rules:
    """The spans `cfg` protects, after a UsageError (one line) for any setting that cannot
    work."""
    check_segment(cfg.segment)
    rules = Rules(cfg.protect, cfg.protect_patterns, cfg.numbers)
    rules.check()
    refusal = engine_class(backend).exact_terms_refusal() if cfg.glossary_exact else None
    if refusal:
        raise GlossaryError(refusal)
    return rules
