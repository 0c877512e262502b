"""The experiment `nmt.train` runs when the command line names none: the one that suits this
machine."""

from __future__ import annotations

from nmt.cli import override_key


def machine_experiment() -> tuple[str, str]:
    """The experiment `nmt.train` runs when none is named, and why: the paper's base model
    where there is a CUDA GPU, else the CPU recipe (a 60-minute budget on the cores at hand)."""
    import torch

    if torch.cuda.is_available():
        return "multi30k_base", f"a CUDA GPU is present ({torch.cuda.get_device_name(0)})"
    return "multi30k_cpu", "no CUDA GPU here, so the CPU recipe (60 minutes on this CPU)"


def with_experiment(overrides: list[str]) -> tuple[list[str], str]:
    """`overrides` with `experiment=...` first if they name none, and a line saying which
    experiment runs and why."""
    named = [o for o in overrides if override_key(o) == "experiment"]
    if named:
        return overrides, f"Experiment: {named[-1].partition('=')[2]} (from the command line)"
    name, why = machine_experiment()
    return [f"experiment={name}", *overrides], (
        f"Experiment: {name}, since {why}; experiment=NAME picks another"
    )
