"""The CTranslate2 export and backend against our torch model, on the session's overfit model.

Stopping rules differ between the two beam searches (ours stops a sentence once no live
hypothesis can beat its k finished ones; CTranslate2 once beam_size hypotheses finished), so
beam outputs are compared by BLEU and by the share of identical lines; greedy must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import OVERFIT_PAIRS, pad, run_module

from nmt.checkpoint import load_checkpoint
from nmt.config import DecodeConfig
from nmt.ct2.model_dir import export, read_model_dir
from nmt.ct2.spec import transformer_spec, unsupported
from nmt.files import read_lines
from nmt.inference.ct2_engine import CTranslate2Engine
from nmt.inference.output_text import best_text
from nmt.vocabulary import BOS_ID, EOS_ID

GREEDY = DecodeConfig()
BEAM = DecodeConfig(strategy="beam", beam_size=4, len_penalty=0.6)


@pytest.fixture(scope="module")
def exported(ct2_f32_dir, ct2_int8) -> dict[str, object]:
    """The overfit model exported in float32 and int8, each loaded on one thread."""
    return {
        q: CTranslate2Engine(folder, "cpu", "default", 1, 4096)
        for q, folder in (("float32", ct2_f32_dir), ("int8", ct2_int8))
    }


@pytest.fixture(scope="module")
def val_lines(overfit_pairs, multi30k_dir) -> tuple[list[str], list[str]]:
    """The overfit model's val split (its 64 pairs) and 40 real val lines it never saw, whose
    outputs run long: both ends of the length limits."""
    real_src = list(read_lines(multi30k_dir / "val.en"))[:40]
    real_ref = list(read_lines(multi30k_dir / "val.de"))[:40]
    return overfit_pairs[0] + real_src, overfit_pairs[1] + real_ref


def bleu(translator, lines, cfg) -> tuple[float, list[str]]:
    sources, references = lines
    hyps = translator.translate(sources, cfg)
    text = [one[0] for one in (translator.tokenizer.decode([h[0].tokens]) for h in hyps)]
    return sacrebleu.corpus_bleu(text, [references]).score, text


def test_float32_export_gives_our_greedy_tokens_on_every_val_line(
    overfit_engine, exported, val_lines
):
    """Every line of the model's val split gives the same tokens and log-probs. On the unseen
    lines, whose outputs wander, a line may differ only where our model's two best next
    tokens are a near-tie (within 0.01 in log-prob), which float rounding in another GEMM
    can flip; each such line is reported."""
    ours = overfit_engine.translate(val_lines[0], GREEDY)
    theirs = exported["float32"].translate(val_lines[0], GREEDY)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if i < OVERFIT_PAIRS:
            assert b[0].tokens == a[0].tokens, f"val line {i}"
            assert b[0].score == pytest.approx(a[0].score, abs=1e-3)
        elif b[0].tokens != a[0].tokens:
            gap = near_tie(overfit_engine, val_lines[0][i], a[0].tokens, b[0].tokens)
            print(f"unseen line {i}: outputs part where our top-2 log-probs differ by {gap:.1e}")
            assert gap < 0.01


def near_tie(translator, line: str, ours: list[int], theirs: list[int]) -> float:
    """Our model's log-prob gap between the two outputs' tokens where they first part."""
    pairs = zip(ours + [EOS_ID], theirs + [EOS_ID], strict=False)  # they part before the end
    k = next(j for j, (x, y) in enumerate(pairs) if x != y)
    src = pad([translator.tokenizer.encode([line])[0] + [EOS_ID]])
    with torch.inference_mode():
        logits = translator.model(src, torch.tensor([[BOS_ID] + ours[:k]]))[0, -1]
    log_probs = logits.float().log_softmax(-1)
    mine = ours[k] if k < len(ours) else EOS_ID
    other = theirs[k] if k < len(theirs) else EOS_ID
    return (log_probs[mine] - log_probs[other]).abs().item()


def test_beam_through_the_export_gives_ours_on_every_val_line(
    overfit_engine, exported, overfit_pairs
):
    """Beam 4 on the model's val split, with the same penalty on both sides (the power law,
    CTranslate2's only form): what could differ is the stopping rule. Ours (exact) ends a
    sentence once no live hypothesis can beat its k finished ones, CTranslate2 once k * 2
    have finished; stop=first_k is CTranslate2's patience 1 exactly. Every line is the same;
    our GNMT alpha, run by CTranslate2 as its power-law counterpart, too."""
    power = replace(BEAM, length_norm="power", len_penalty=1.0)
    sources = overfit_pairs[0]
    ours = overfit_engine.translate(sources, power)
    theirs = exported["float32"].translate(sources, power)
    ours_bleu, ours_text = bleu(overfit_engine, overfit_pairs, power)
    theirs_bleu, theirs_text = bleu(exported["float32"], overfit_pairs, power)
    same = sum(a == b for a, b in zip(ours_text, theirs_text, strict=True)) / len(ours_text)
    print(f"\nbeam 4, power 1.0: ours {ours_bleu:.2f}, CT2 {theirs_bleu:.2f} BLEU, {same:.0%} same")
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a[0].tokens != b[0].tokens:
            print(
                f"line {i}: ours {a[0].score:.4f} ({len(a[0].tokens)} tokens), "
                f"CT2 {b[0].score:.4f} ({len(b[0].tokens)} tokens)"
            )
            assert a[0].score >= b[0].score - 1e-4
    assert ours_text == theirs_text
    first_k = replace(power, stop="first_k")  # may end a line early: on both sides alike
    ours_first_k = bleu(overfit_engine, overfit_pairs, first_k)[1]
    assert bleu(exported["float32"], overfit_pairs, first_k)[1] == ours_first_k
    gnmt, gnmt_text = bleu(overfit_engine, overfit_pairs, BEAM)
    mapped, mapped_text = bleu(exported["float32"], overfit_pairs, BEAM)  # as power 0.48
    print(f"beam 4, ours GNMT 0.6 {gnmt:.2f} BLEU, CT2 power 0.48 {mapped:.2f}")
    assert gnmt_text == mapped_text


def test_int8_loads_and_translates_line_for_line(exported, val_lines):
    lines = [val_lines[0][0], "", "   ", val_lines[0][1], val_lines[0][64]]
    hyps = exported["int8"].translate(lines, GREEDY)
    assert [bool(h) for h in hyps] == [True, False, False, True, True]
    int8, int8_text = bleu(exported["int8"], val_lines, GREEDY)
    float32, float32_text = bleu(exported["float32"], val_lines, GREEDY)
    print(f"greedy BLEU: int8 {int8:.2f}, float32 {float32:.2f}")
    kept = sum(a == b for a, b in zip(int8_text, float32_text[:OVERFIT_PAIRS], strict=False))
    if int8_vnni():
        # with VNNI (the Xeons), int8 keeps every memorised translation; on the unseen lines,
        # whose outputs wander, its rounding may part them from float32's (1.4 BLEU here)
        assert kept == OVERFIT_PAIRS
        assert abs(int8 - float32) <= 2.0
    else:
        # without (an AVX2 EPYC: CTranslate2's int8 GEMM there rounds coarser), this tiny
        # model kept 47 of 64 memorised lines, 86.8 BLEU on them (docs/benchmarks.md)
        assert kept >= 0.6 * OVERFIT_PAIRS
        assert int8 >= float32 - 15.0


@pytest.mark.parametrize(
    "quantization",
    ["int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16"],
)
def test_every_other_quantization_exports_loads_and_keeps_the_memorised_lines(
    quantization, model_pt, exported, overfit_pairs, tmp_path
):
    """Each weight type the export offers loads on this CPU (CTranslate2 computes a type the
    CPU lacks in the nearest it has) and translates the memorised pairs as float32 does: all
    but a few where integer products round coarser (as test_int8_loads_... allows)."""
    out = export(load_checkpoint(model_pt), tmp_path / quantization, quantization, False)
    engine = CTranslate2Engine(out, "cpu", "default", 1, 4096)
    assert engine.dir.quantization == quantization
    sources = overfit_pairs[0]
    text = best_text(engine.tokenizer, engine.translate(sources, GREEDY))
    want = best_text(exported["float32"].tokenizer, exported["float32"].translate(sources, GREEDY))
    kept = sum(a == b for a, b in zip(text, want, strict=True))
    # int16 is computed as int8 where the CPU has no int16 kernels (CTranslate2 warns)
    exact = int8_vnni() or not quantization.startswith("int")
    assert kept >= (0.9 if exact else 0.6) * OVERFIT_PAIRS, (kept, text[:3])


# ISA caps below VNNI, as MKL_ENABLE_INSTRUCTIONS and ONEDNN_MAX_CPU_ISA spell them: CTranslate2
# multiplies int8 with MKL on Intel CPUs and with oneDNN elsewhere, each held to its cap
ISA_CAPS_WITHOUT_VNNI = ("SSE4_2", "SSE41", "AVX", "AVX2", "AVX512", "AVX512_CORE")


def int8_vnni() -> bool:
    """Whether CTranslate2 multiplies int8 with VNNI here: the CPU has it (AVX-512 VNNI,
    AVX-VNNI or AMX) and no ISA cap keeps the GEMM libraries below it."""
    caps = (
        os.environ.get(name, "").upper()
        for name in ("MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
    )
    if any(cap in ISA_CAPS_WITHOUT_VNNI for cap in caps):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def test_the_export_carries_the_direction_search_and_tokenizer(model_pt, exported):
    model_dir = exported["int8"].dir
    translator = load_checkpoint(model_pt)
    assert (model_dir.src_lang, model_dir.tgt_lang) == ("en", "de")
    assert model_dir.search == translator.search and model_dir.quantization == "int8"
    assert model_dir.tokenizer.model_bytes == translator.tokenizer.model_bytes
    config = json.loads((model_dir.path / "config.json").read_text())
    assert config["add_source_eos"] is True and config["decoder_start_token"] == "<s>"


def test_a_setting_the_export_cannot_express_is_named(overfit_engine):
    cfg = replace(overfit_engine.model.cfg)
    object.__setattr__(cfg, "activation", "tanh")  # past ModelConfig's own check
    assert unsupported(cfg).startswith("model.activation='tanh'")
    model = overfit_engine.model
    original = model.cfg
    model.cfg = cfg
    try:
        with pytest.raises(ValueError, match="model.activation"):
            transformer_spec(model, overfit_engine.tokenizer)
    finally:
        model.cfg = original


def run(module: str, args: list[str], cwd, stdin: bytes = b""):
    done = run_module(module, args, cwd, stdin)
    return done.returncode, done.stdout.decode(), done.stderr.decode().strip().splitlines()


def test_translate_and_evaluate_with_the_ctranslate2_backend(
    model_pt, exported, overfit_data, overfit_pairs, overfit_engine, tmp_path
):
    stdin = ("\n".join(overfit_pairs[0][:6]) + "\n\n").encode()
    torch_run = run("nmt.translate", [f"ckpt={model_pt}", "decode=greedy"], tmp_path, stdin)
    ct2_dir = exported["float32"].dir.path
    args = [f"ckpt={ct2_dir}", "backend=ctranslate2", "decode=greedy"]
    ct2_run = run("nmt.translate", args, tmp_path, stdin)
    assert torch_run[0] == ct2_run[0] == 0, ct2_run[2]
    assert ct2_run[1] == torch_run[1] and ct2_run[1].count("\n") == 7
    # evaluate on the CT2 dir, and write the search it ran back into nmt.json
    args = [
        f"ckpt={ct2_dir}",
        "backend=ctranslate2",
        f"data.dir={overfit_data}",
        "splits=[valid]",
        "decode.length_norm=power",
        "decode.len_penalty=1.0",
        "save_search=true",
        f"hydra.run.dir={tmp_path / 'report'}",
    ]
    code, out, err = run("nmt.evaluate", args, tmp_path)
    assert code == 0, err[-5:]
    assert "valid: BLEU" in out
    stored = read_model_dir(ct2_dir).search
    assert (stored.length_norm, stored.len_penalty) == ("power", 1.0)
    report = json.loads((tmp_path / "report" / "evaluation.json").read_text())
    assert report["backend"].startswith("ctranslate2") and report["decode"]["len_penalty"] == 1.0
    # the parameters the export recorded for it: the torch model's
    assert report["checkpoint"]["parameters"] == overfit_engine.num_parameters > 0


@pytest.mark.parametrize(
    "module, args, message",
    [
        ("nmt.export", ["quantization=int7"], "quantization='int7' is not one of"),
        ("nmt.export", ["format=onnx"], "format='onnx'"),
        ("nmt.translate", ["decode=beam", "decode.beam_size=2", "nbest=3"], "exceeds"),
        ("nmt.translate", ["backend=onnx", "prefix_file=prefixes.txt"], "backend must be one of"),
        (
            "nmt.translate",
            ["backend=ctranslate2", "ckpt=no_such_dir"],
            "ckpt=no_such_dir not found",
        ),
        ("nmt.translate", ["decode=greedy", "nbest=2"], "needs strategy beam"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(module, args, message, model_pt, tmp_path):
    (tmp_path / "prefixes.txt").write_text("Ein\n")
    base = [f"ckpt={model_pt}"] + ([f"out={tmp_path / 'out'}"] if module == "nmt.export" else [])
    code, out, err = run(module, base + args, tmp_path, b"A man.\n")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"{module}: error:"), err
    assert message in err[0] and out == ""
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_export_command_writes_a_directory_that_translates(model_pt, overfit_pairs, tmp_path):
    code, _, err = run("nmt.export", [f"ckpt={model_pt}", f"out={tmp_path / 'm'}"], tmp_path)
    assert code == 0, err
    again = run("nmt.export", [f"ckpt={model_pt}", f"out={tmp_path / 'm'}"], tmp_path)
    assert again[0] == 2 and "exists" in again[2][0]
    args = [f"ckpt={model_pt}", f"out={tmp_path / 'm'}", "overwrite=true", "quantization=int16"]
    replaced = run("nmt.export", args, tmp_path)
    assert replaced[0] == 0, replaced[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no staging left behind
    translator = CTranslate2Engine(tmp_path / "m", "cpu", "default", 1, 4096)
    assert translator.dir.quantization == "int16"  # the earlier export, replaced
    assert {"model.bin", "nmt.json", "sentencepiece.model", ".nmt-export"} <= {
        p.name for p in (tmp_path / "m").iterdir()
    }
    assert all(translator.translate(overfit_pairs[0][:2], GREEDY))


def test_parallel_workers_give_the_outputs_of_one(exported, val_lines):
    """On the CPU each thread is a worker decoding its own batches: batches of 8 sentences
    spread over 2 workers come back in input order with one worker's outputs."""
    one = exported["int8"]
    budget = 8 * 4 * 40  # about 8 sentences of beam 4 per batch: several batches in flight
    one = CTranslate2Engine(one.dir.path, "cpu", "default", 1, budget)
    two = CTranslate2Engine(one.dir.path, "cpu", "default", 2, budget)
    lines = val_lines[0][:40]
    expected = [[h.tokens for h in n] for n in one.translate(lines, BEAM)]
    assert [[h.tokens for h in n] for n in two.translate(lines, BEAM)] == expected


def test_a_hypothesis_cut_at_the_length_limit_has_the_log_prob_of_its_tokens(exported, val_lines):
    """CTranslate2 scores a hypothesis that reaches the limit without EOS (ours forces EOS and
    counts it: docs/guide.md): its log-prob is then its tokens' alone, that of one that ended
    its tokens' and EOS's (force-decoded by score_batch)."""
    engine = exported["float32"]
    lines = val_lines[0][:12]
    search = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, length_norm="power")
    search = replace(search, max_len_a=0.0, max_len_b=60, nbest=2)
    # a limit some of the hypotheses the search ends unhindered reach and some do not
    ended = sorted(len(hyp.tokens) for nbest in engine.translate(lines, search) for hyp in nbest)
    limit = ended[len(ended) // 2]
    assert ended[0] < limit, ended
    nbests = engine.translate(lines, replace(search, max_len_b=limit))
    found = [hyp for nbest in nbests for hyp in nbest]
    sources = [line for line, nbest in zip(lines, nbests, strict=True) for _ in nbest]
    scored = engine.score(sources, [hyp.tokens for hyp in found])
    cut = 0
    for hyp, rated in zip(found, scored, strict=True):
        tokens_only = len(hyp.tokens) == limit
        cut += tokens_only
        expected = sum(rated.token_log_probs[:-1] if tokens_only else rated.token_log_probs)
        assert hyp.log_prob == pytest.approx(expected, abs=1e-3), (hyp.tokens, tokens_only)
    assert 0 < cut < len(found)


@pytest.mark.parametrize(
    "changes",
    [{"tie_embeddings": False}, {"tie_embeddings": False, "norm": "pre", "activation": "gelu"}],
    ids=["untied", "untied_pre_norm_gelu"],
)
def test_an_untied_model_exports_to_its_own_log_probs(changes, overfit_engine, val_lines, tmp_path):
    """Separate input and output embeddings (and pre-norm, gelu) through the float32 export:
    every token's log-prob of real val pairs as torch computes it, on random weights far from
    their initial values."""
    from nmt.checkpoint import Checkpoint
    from nmt.inference.torch_engine import TorchEngine
    from nmt.model import ModelConfig, Transformer

    tokenizer = overfit_engine.tokenizer
    torch.manual_seed(0)
    shape = dict(d_model=32, n_heads=2, d_ff=48, encoder_layers=2, decoder_layers=2)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, **shape, **changes)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    checkpoint = Checkpoint(model, tokenizer, "en", "de", {})
    ours = TorchEngine(checkpoint, 4096)
    exported = export(checkpoint, tmp_path / "float32", "float32", False)
    theirs = CTranslate2Engine(exported, "cpu", "default", 1, 4096)
    sources, references = val_lines[0][-8:], val_lines[1][-8:]
    for a, b in zip(
        ours.score(sources, references), theirs.score(sources, references), strict=True
    ):
        assert b.token_log_probs == pytest.approx(a.token_log_probs, abs=2e-4)


# `python -m MODULE ARGS` in an interpreter where importing torch fails
WITHOUT_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; module, *sys.argv[1:] = sys.argv[1:]; "
    "sys.argv[0] = module; runpy.run_module(module, run_name='__main__', alter_sys=True)"
)
# the same, torch importable, printing at exit whether it was imported: evaluate's `datasets`
# takes a None in sys.modules for torch itself (its hashing then imports it)
TORCH_AT_EXIT = (
    "import atexit, runpy, sys; atexit.register(lambda: print('torch' in sys.modules)); "
    "module, *sys.argv[1:] = sys.argv[1:]; sys.argv[0] = module; "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)
SERVER_WITHOUT_TORCH = """
import sys; sys.modules['torch'] = None
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from nmt.config import CONF_DIR, register_configs
from nmt.serving.server import build_server
register_configs("serve")
with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
    cfg = OmegaConf.to_object(compose("serve", overrides=sys.argv[1:]))
print(build_server(cfg, sys.argv[1:])[1])
"""


def fresh(cwd: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    """`python -c code args` in an interpreter of its own (the zygote's forks have torch),
    its datasets cache in `cwd`."""
    env = {**os.environ, "HF_DATASETS_CACHE": str(cwd / "hf")}
    command = [sys.executable, "-c", code, *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=120, env=env)


def test_the_ctranslate2_backend_needs_no_torch(ct2_int8, overfit_pairs, overfit_data, tmp_path):
    """nmt.translate, the server's set-up and nmt.evaluate on the CTranslate2 backend import no
    torch (~1.7 s of every such command's start): where `import torch` fails, translate prints
    what it prints beside torch, scores and beam alignments included, and the server is
    built; evaluate ends without having imported it (the export recorded the model's
    parameters for its record)."""
    source = tmp_path / "in.en"
    source.write_text("".join(line + "\n" for line in overfit_pairs[0][:6]))
    args = [f"ckpt={ct2_int8}", "backend=ctranslate2", f"input={source}", "progress=false"]
    args += ["decode=beam", "alignments=true", "scores=true"]
    bare = fresh(tmp_path, WITHOUT_TORCH, "nmt.translate", *args)
    assert bare.returncode == 0, bare.stderr[-2000:]
    beside = run_module("nmt.translate", args, tmp_path, text=True)
    assert bare.stdout == beside.stdout and len(bare.stdout.splitlines()) == 6
    served = fresh(tmp_path, SERVER_WITHOUT_TORCH, f"ckpt={ct2_int8}", "backend=ctranslate2")
    assert served.returncode == 0 and "CTranslate2" in served.stdout, served.stderr[-2000:]
    args = [f"ckpt={ct2_int8}", "backend=ctranslate2", f"data.dir={overfit_data}"]
    args += ["splits=[valid]", f"hydra.run.dir={tmp_path / 'report'}"]
    evaluated = fresh(tmp_path, TORCH_AT_EXIT, "nmt.evaluate", *args)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert evaluated.stdout.splitlines()[-1] == "False" and "valid: BLEU" in evaluated.stdout
