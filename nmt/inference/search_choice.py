"""The search a command runs: the one stored with the model, changed by the command line."""

from __future__ import annotations

from dataclasses import replace

from nmt.cli import override_key
from nmt.decoding.settings import DecodeConfig, describe_search
from nmt.inference.engine import ModelCard
from nmt.inference.loading import engine_class


def chosen_search(
    command: DecodeConfig, stored: DecodeConfig | None, overrides: list[str]
) -> tuple[DecodeConfig, str]:
    """The search a command runs, and where it comes from.

    `command`: the command's composed `decode`; `stored`: the model's own search, None for a
    model written before searches were stored; `overrides`: the command line. A `decode=NAME`
    override takes the command's whole search; `decode.FIELD=...` overrides change those
    fields of the model's search; with neither, the model's search runs. A model without one
    falls back to the command's default.
    """
    keys = [override_key(o) for o in overrides]
    if "decode" in keys:
        return command, "decode= from the command line"
    if stored is None:
        return command, (
            "the checkpoint stores no search (written before nmt stored one), so this "
            f"command's default: {describe_search(command)}"
        )
    fields = [k.removeprefix("decode.") for k in keys if k.startswith("decode.")]
    search = replace(stored, **{name: getattr(command, name) for name in fields})
    where = "the checkpoint's own"
    return search, where + (f", with {', '.join(fields)} from the command line" if fields else "")


def choose_search(
    card: ModelCard, command: DecodeConfig, overrides: list[str], **fields
) -> tuple[DecodeConfig, str]:
    """The search to run on `card`'s engine (`chosen_search`, then `fields` on top, as the
    engine runs it) and a log line saying what it is and where it comes from."""
    search, where = chosen_search(command, card.search, overrides)
    search, note = engine_class(card.engine).runnable(replace(search, **fields))
    return search, f"Search: {describe_search(search)} ({where}{note})"
