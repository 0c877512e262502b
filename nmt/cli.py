"""What every command line shares: logging to stderr, and errors as one line.

A refusal is one line on stderr, `nmt.<command>: error: <what went wrong>`, never a
traceback: exit code 2 for a bad command line (a missing mandatory setting, with an example
of the command that works, or a `UsageError`: settings that cannot go together, a path given
that is not there, a `SearchError`), 1 for everything else (a damaged file, data that fails).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue
from tqdm import tqdm

from nmt.config import CONF_DIR
from nmt.errors import UsageError


def override_key(override: str) -> str:
    """The config key a Hydra command-line override names: `a.b=1`, `+a.b=1`, `~a.b` -> a.b."""
    return override.lstrip("+~").partition("=")[0]


def answer_help(config_name: str) -> None:
    """`--help` (or -h) printed from the command's YAML, its hydra.help header and the shared
    template of conf/hydra/help/nmt.yaml, then exit 0, before Hydra composes anything: Hydra
    lists every config group's options for its help first (about 3 s), which our template
    never shows."""
    if not {"--help", "-h"} & set(sys.argv[1:]):
        return
    shared = OmegaConf.load(CONF_DIR / "hydra" / "help" / "nmt.yaml")
    own = OmegaConf.load(CONF_DIR / f"{config_name}.yaml").hydra.help
    print(OmegaConf.create({"hydra": {"help": OmegaConf.merge(shared, own)}}).hydra.help.template)
    raise SystemExit(0)


def before_hydra(config_name: str) -> None:
    """What a command does before Hydra takes its command line: answer --help from its YAML
    (`answer_help`), and let Hydra compose its config once, not twice (`mode_from_command_line`)."""
    answer_help(config_name)
    mode_from_command_line()


# Hydra's flags that put another YAML in place of, or beside, the command's own
OTHER_CONFIG_FLAGS = ("--config-name", "-cn", "--config-dir", "-cd", "--config-path", "-cp")


def mode_from_command_line() -> None:
    """Hydra composes a command's whole config once only to read `hydra.mode`, then again to
    run (~65 ms of a forked one-line translate's ~375). No YAML of ours sets hydra.mode
    (tests/test_configs.py), so where the command line could not bring one that does (no
    hydra key, no experiment, no config of the user's by Hydra's flags), the mode is the
    command line's own: a sweep with -m/--multirun, a run without. Anything else is composed
    as Hydra does."""
    from hydra._internal.hydra import Hydra

    composed = Hydra.get_mode

    def get_mode(self, config_name: str | None, overrides: list[str]):
        if could_set_the_mode(overrides, sys.argv[1:]):
            return composed(self, config_name=config_name, overrides=overrides)
        return None  # Hydra's own answer when no config sets it: -m or not decides

    Hydra.get_mode = get_mode


def could_set_the_mode(overrides: list[str], argv: list[str]) -> bool:
    """Whether a command line's overrides or flags could bring a `hydra.mode` in: a hydra key,
    an experiment that is not one of ours (each of a sweep's), or a config of the user's."""
    flags = [arg.partition("=")[0] for arg in argv]
    return any(could_bring_a_mode(override) for override in overrides) or any(
        flag in OTHER_CONFIG_FLAGS for flag in flags
    )


def could_bring_a_mode(override: str) -> bool:
    """Whether one override could: `experiment=X` only if X is no YAML of ours, whose
    experiments set none (tests/test_configs.py); a user's comes through a hydra key or a flag,
    which compose anyway."""
    key, value = override_key(override), override.partition("=")[2]
    if key.startswith("hydra"):
        return True
    if key != "experiment":
        return False
    ours = CONF_DIR / "experiment"
    return not all((ours / f"{name.strip()}.yaml").is_file() for name in value.split(","))


def setup_logging() -> None:
    """INFO and above on stderr: stdout is for results (translations, scores)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )


def lightning_logs_once() -> None:
    """Lightning's messages through the handlers already set up (Hydra's), once each, and
    without its advertisement for a cloud logger. Imported before logging is set up, Lightning
    gives its loggers a console handler of its own, so each of its lines came twice."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
        lambda record: "litlogger" not in record.getMessage()
    )


def fail(command: str, message: str, code: int = 1) -> NoReturn:
    """End the command with one line on stderr."""
    print(f"{command}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


@contextmanager
def one_line_errors(command: str, example: str) -> Iterator[None]:
    """Turn the errors a user can cause into one line each. `example`: a command that works,
    shown when a mandatory setting is missing."""
    try:
        yield
    except MissingMandatoryValue as error:
        key = error.full_key or str(error).splitlines()[0]
        fail(command, f"{key} is required, e.g. {example}", code=2)
    except UsageError as error:  # and its kinds: SearchError, SpanError, GlossaryError
        fail(command, str(error), code=2)
    except (OSError, ValueError, FloatingPointError) as error:
        fail(command, str(error))


def show_progress(setting: str, default: bool) -> bool:
    """Whether a command draws its progress bar (on stderr): `progress=true|false`, or for
    `auto` the command's `default`."""
    value = str(setting).lower()  # the command line's true/false arrive as "True"/"False"
    if value not in ("auto", "true", "false"):
        raise UsageError(f"progress must be auto, true or false, not {setting!r}")
    return value == "true" or (value == "auto" and default)


def progress_bar(show: bool, **kwargs) -> tqdm:
    """A tqdm bar on stderr (stdout is for results), drawn only if `show`."""
    return tqdm(file=sys.stderr, disable=not show, **kwargs)
