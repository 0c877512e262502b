"""Every config file composes, typed, and every experiment composes with its overrides."""

import pytest
from conftest import compose, compose_train_config
from hydra.errors import ConfigCompositionException

from nmt.config import CONF_DIR, TrainConfig, TranslateConfig

GROUPS = ["data", "tokenizer", "model", "optim", "trainer", "decode"]
EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
compose_train = compose_train_config


@pytest.mark.parametrize(
    "group,option",
    [(g, p.stem) for g in GROUPS for p in sorted((CONF_DIR / g).glob("*.yaml"))],
)
def test_every_group_option_composes(group, option):
    overrides = [f"{group}={option}"]
    if (group, option) == ("data", "files"):
        overrides += ["data.data_files.train.en=a.en", "data.data_files.train.de=a.de"]
    cfg = compose_train(overrides)
    assert isinstance(cfg, TrainConfig)


# what an experiment requires besides: finetune's replay file, and a warmup its cosine ends
NEEDS = {"finetune": ["data.replay.file=general.tsv", "optim.warmup_steps=1"]}


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_with_overrides(experiment):
    overrides = [f"experiment={experiment}", "trainer.max_steps=7", "model.dropout=0.2"]
    cfg = compose_train(overrides + NEEDS.get(experiment, []))
    assert cfg.experiment_name == experiment
    assert cfg.trainer.max_steps == 7 and cfg.model.dropout == 0.2
    assert cfg.model.vocab_size == cfg.tokenizer.vocab_size


def test_experiments_state_the_papers_recipes():
    base = compose_train(["experiment=wmt14_base"])
    assert (base.model.d_model, base.model.n_heads, base.model.d_ff) == (512, 8, 2048)
    assert base.tokenizer.vocab_size == 37000 and base.trainer.max_steps == 100_000
    assert base.data.max_tokens * base.trainer.accumulate_grad_batches == 25_000
    assert (base.decode.strategy, base.decode.beam_size, base.decode.len_penalty) == (
        "beam",
        4,
        0.6,
    )
    big = compose_train(["experiment=wmt14_big"])
    assert (big.model.d_model, big.model.n_heads, big.model.d_ff) == (1024, 16, 4096)
    assert big.trainer.max_steps == 300_000


@pytest.mark.parametrize("gpu,expected", [(True, "multi30k_base"), (False, "multi30k_cpu")])
def test_the_machine_picks_the_experiment_unless_one_is_named(monkeypatch, gpu, expected):
    import torch

    from nmt.training.experiment_choice import with_experiment

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "a test GPU")
    overrides, line = with_experiment(["trainer.max_steps=7"])
    assert overrides == [f"experiment={expected}", "trainer.max_steps=7"]
    assert line.startswith(f"Experiment: {expected}, since ") and "experiment=NAME" in line
    assert compose_train(overrides).experiment_name == expected
    named = ["experiment=wmt14_big"]
    assert with_experiment(named) == (named, "Experiment: wmt14_big (from the command line)")
    with pytest.raises(ConfigCompositionException, match="You must specify 'experiment'"):
        compose("train", [])  # without the entry point's choice, the config names none


@pytest.mark.parametrize(
    "override", ["model.d_modle=3", "model.d_model=abc", "trainer.max_steps=many", "data.nope=1"]
)
def test_typos_and_wrong_types_fail_at_start_up(override):
    with pytest.raises(ConfigCompositionException):
        compose_train([override])


@pytest.mark.parametrize(
    "override,message",
    [
        ("data.bpe_dropout=1.0", "data.bpe_dropout must be in"),
        ("model.n_heads=7", "is not divisible by n_heads=7"),
        ("model.activation=tanh", "model.activation must be one of"),
        ("checkpoint.average_last_epochs=[5,0]", "checkpoint.average_last_epochs lists"),
        ("model.pad_id=99999", "model.pad_id=99999 is not an id of the"),
        ("val_bleu=false", "val_bleu=false logs no val/bleu"),
        ("final_evaluation.splits=[val,test]", r"final_evaluation.splits=\['val'\] not in data"),
        ("~data.splits.valid", "data.splits has no valid role"),
    ],
)
def test_values_out_of_range_fail_at_start_up_naming_the_key(override, message):
    with pytest.raises(ValueError, match=message):
        compose_train([override])


def test_doubled_epochs_under_an_epoch_budget_with_a_fitted_schedule_are_refused():
    """Lightning would count every epoch's updates as the first, doubled, epoch's: the
    schedule fitted to that count would end far from the run's end."""
    by_epochs = ["data.bidirectional_epochs=2", "trainer.max_time=null", "trainer.max_epochs=20"]
    with pytest.raises(ValueError, match="set trainer.max_steps or max_time"):
        compose_train(by_epochs)
    assert compose_train([*by_epochs, "trainer.max_steps=3000"]).data.bidirectional_epochs == 2


def test_translate_config_composes():
    cfg = compose("translate", ["ckpt=x.pt", "decode=beam", "nbest=3"])
    assert isinstance(cfg, TranslateConfig)
    assert cfg.decode.beam_size == 4 and cfg.decode.nbest == 3


@pytest.mark.parametrize("native", [True, False])
def test_the_cpu_recipe_trains_in_bf16_only_where_the_cpu_has_it(monkeypatch, native):
    import nmt.cpu

    monkeypatch.setattr(nmt.cpu, "cpu_has_native_bf16", lambda: native)
    cfg = compose_train(["experiment=multi30k_cpu"])
    assert cfg.trainer.precision == ("bf16-mixed" if native else "32-true")


@pytest.mark.parametrize(
    "option,domain", [("ding", "everyday"), ("gettext", "software"), ("docs", "docs")]
)
def test_a_one_domain_data_config_trains_on_that_domain_alone(option, domain):
    """Its `domains` merge into the default mix, so it turns the mix's others off."""
    domains = compose_train([f"data={option}"]).data.corpus.domains
    assert {name for name, weight in domains.items() if weight > 0} == {domain}


def test_the_general_mix_leaves_the_documentation_out_and_the_command_line_adds_it():
    """data=general's mix as measured (docs/experiments.md): no documentation by default; the
    README's `+data.corpus.domains.docs=1.0` adds it beside the other domains, unchanged."""
    mix = compose_train(["experiment=general_cpu"]).data.corpus.domains
    assert "docs" not in mix and mix["multi30k"] == mix["everyday"] == mix["software"] == 1.0
    added = compose_train(["experiment=general_cpu", "+data.corpus.domains.docs=1.0"])
    assert added.data.corpus.domains == {**mix, "docs": 1.0}


def test_no_yaml_of_ours_sets_the_run_mode():
    """nmt.cli.mode_from_command_line trusts this: only the command line says -m."""
    from omegaconf import OmegaConf

    def modes(node) -> list:
        if not isinstance(node, dict):
            return []
        here = [node["hydra"]["mode"]] if "mode" in (node.get("hydra") or {}) else []
        return here + [mode for value in node.values() for mode in modes(value)]

    files = sorted(CONF_DIR.rglob("*.yaml"))
    assert len(files) > 30
    found = {p.name: modes(OmegaConf.to_container(OmegaConf.load(p))) for p in files}
    assert not {name: m for name, m in found.items() if m}


def test_hydra_composes_for_the_run_mode_only_where_the_command_line_could_set_it(monkeypatch):
    """A plain command line, or one naming our experiments: no compose, the mode Hydra's own
    gives when no config sets it (None: -m or not decides). One naming hydra.mode, or a hydra
    key, or an experiment not ours, or a config of the user's: Hydra's own compose, whose
    answer it returns."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from nmt.cli import could_set_the_mode, mode_from_command_line
    from nmt.config import register_configs

    register_configs("translate")
    composed = []
    original = Hydra.get_mode

    def composing(self, config_name, overrides):
        composed.append(list(overrides))
        return original(self, config_name=config_name, overrides=overrides)

    monkeypatch.setattr(Hydra, "get_mode", composing)
    hydra = Hydra.create_main_hydra2("translate", create_config_search_path(str(CONF_DIR)))
    try:
        assert hydra.get_mode("translate", ["ckpt=m.pt"]) is None  # Hydra's own, composed
        mode_from_command_line()
        assert Hydra.get_mode is not composing
        composed.clear()
        assert hydra.get_mode("translate", ["ckpt=m.pt", "decode=beam"]) is None
        assert composed == []
        multirun = ["ckpt=m.pt", "hydra.mode=MULTIRUN"]
        assert hydra.get_mode("translate", multirun) == RunMode.MULTIRUN
        assert hydra.get_mode("train", ["experiment=smoke"]) is None  # ours: sets no mode
        assert hydra.get_mode("train", ["experiment=smoke,finetune"]) is None
        assert composed == [multirun]
        assert hydra.get_mode("train", ["experiment=smoke,mine"]) is None  # not ours: composed
        assert composed == [multirun, ["experiment=smoke,mine"]]
    finally:
        GlobalHydra.instance().clear()
    assert not could_set_the_mode(["ckpt=m.pt", "decode.beam_size=8"], ["-m", "ckpt=m.pt"])
    assert could_set_the_mode(["hydra/launcher=submitit_local"], [])
    for flags in (["--config-dir", "mine"], ["-cn=mine"], ["--config-path=mine"]):
        assert could_set_the_mode(["ckpt=m.pt"], [*flags, "ckpt=m.pt"])
