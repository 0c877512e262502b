"""`nmt.export format=hf`: a directory transformers loads with its own classes, computing what
our model computes, searching as ours does, refusing what Marian cannot express."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_module

from nmt.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from nmt.decoding.settings import DecodeConfig
from nmt.hf.marian import feature_order, marian_model
from nmt.model import ModelConfig, Transformer, sinusoidal_positions
from nmt.vocabulary import EOS_ID

pytestmark = pytest.mark.xdist_group("hf_export")
MAX_TOKENS = 30  # both searches held to this many tokens, then EOS
TRANSFORMERS4 = Path(sys.prefix) / "transformers4"  # `make install` puts transformers 4 there


def random_model(**changes) -> Transformer:
    """A small model with weights far from their initial values (LayerNorms included)."""
    shape = dict(vocab_size=60, d_model=16, n_heads=2, d_ff=24, encoder_layers=2)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**{**shape, "decoder_layers": 2, "dropout": 0.0, **changes}))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model.eval()


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"tie_embeddings": False},
        {"activation": "gelu", "encoder_layers": 3, "decoder_layers": 1},
    ],
    ids=["tied", "untied", "gelu-3+1"],
)
def test_marian_computes_our_log_probs(changes):
    """Teacher-forced log-probs of MarianMTModel with our weights equal ours, padding included:
    positions, embedding scale, tying, activation and the feature permutation all agree."""
    model = random_model(**changes)
    hf = marian_model(model)
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0]])
    tgt = torch.tensor([[2, 12, 13, 14, 15], [2, 16, 17, 18, 19]])
    with torch.no_grad():
        ours = model(src, tgt).log_softmax(-1)
        theirs = hf(input_ids=src, attention_mask=src.ne(0), decoder_input_ids=tgt).logits
    torch.testing.assert_close(theirs.log_softmax(-1), ours, atol=2e-5, rtol=0)


def test_feature_order_maps_our_position_table_onto_marians():
    """Marian's table (sin in the first half, cos in the second) is ours permuted."""
    hf = marian_model(random_model(max_positions=64))
    ours = sinusoidal_positions(64, 16)
    torch.testing.assert_close(
        hf.model.encoder.embed_positions.weight, ours[:, feature_order(16)], atol=1e-6, rtol=0
    )


@pytest.fixture(scope="module")
def hf_dir(model_pt: Path, tmp_path_factory) -> Path:
    """The overfit model exported by the command, with an evaluation.json beside it."""
    folder = tmp_path_factory.mktemp("hf_export")
    shutil.copy(model_pt, folder / "model.pt")
    info = load_checkpoint(folder / "model.pt").info
    evaluation = {
        "checkpoint": {"info": info},
        "backend": "torch, weights in float32",
        "data": {"name": "multi30k"},
        "splits": {
            "test": {
                "split": "test_2016_flickr",
                "sentences": 1000,
                "bleu": 38.123,
                "bleu_lowercase": 38.5,
                "chrf": 61.0,
                "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:X",
                "bleu_lowercase_signature": "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:X",
                "chrf_signature": "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:X",
            }
        },
    }
    (folder / "evaluation").mkdir()
    (folder / "evaluation/evaluation.json").write_text(json.dumps(evaluation))
    done = run_module(
        "nmt.export", [f"ckpt={folder / 'model.pt'}", f"out={folder / 'hf'}", "format=hf"], folder
    )
    assert done.returncode == 0, done.stderr.decode()
    return folder / "hf"


def our_greedy(engine, lines: list[str]) -> list[list[int]]:
    search = DecodeConfig(max_len_a=0.0, max_len_b=MAX_TOKENS)
    return [nbest[0].tokens for nbest in engine.translate(lines, search)]


def test_transformers_gives_our_greedy_tokens_on_every_val_line(
    hf_dir, overfit_engine, multi30k_dir
):
    """MarianTokenizer gives our ids (EOS appended) and generate our greedy tokens, on every
    line of the real val split, and decodes them to our text."""
    from transformers import MarianMTModel, MarianTokenizer

    lines = (multi30k_dir / "val.en").read_text(encoding="utf-8").splitlines()
    tokenizer = MarianTokenizer.from_pretrained(hf_dir)
    model = MarianMTModel.from_pretrained(hf_dir).eval()

    def punctuation_normalized(text):  # sacremoses' normalizer, whose absence it warns of
        raise AssertionError(f"MarianTokenizer normalized {text!r}")

    tokenizer.punc_normalizer = punctuation_normalized  # never called by tokenizing
    ours_ids = overfit_engine.tokenizer.encode(lines)
    assert [tokenizer(line)["input_ids"] for line in lines] == [i + [EOS_ID] for i in ours_ids]

    theirs = []
    with torch.inference_mode():
        for start in range(0, len(lines), 128):
            batch = tokenizer(lines[start : start + 128], return_tensors="pt", padding=True)
            out = model.generate(**batch, num_beams=1, max_new_tokens=MAX_TOKENS + 1)
            theirs += [row[1:][: row[1:].index(EOS_ID)] for row in out.tolist()]
    ours = our_greedy(overfit_engine, lines)
    assert theirs == ours
    texts = tokenizer.batch_decode(
        [[2, *t, EOS_ID] for t in theirs[:100]], skip_special_tokens=True
    )
    # MarianTokenizer strips the text's ends (a trailing lone "▁" piece); ours keeps them
    assert texts == [text.strip() for text in overfit_engine.tokenizer.decode(ours[:100])]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_precision_export_holds_our_weights_rounded(
    dtype, model_pt, overfit_pairs, tmp_path
):
    """format=hf quantization=float16|bfloat16: every weight in the file is of that type, the
    card says so, and transformers (reading it in float32) gives the greedy tokens of our
    model whose weights were rounded to that type: the file holds exactly those numbers."""
    from safetensors import safe_open
    from transformers import MarianMTModel, MarianTokenizer

    from nmt.hf.model_dir import export_hf
    from nmt.inference.torch_engine import TorchEngine

    half = getattr(torch, dtype)
    out = export_hf(load_checkpoint(model_pt), tmp_path / dtype, dtype, False)
    with safe_open(out / "model.safetensors", "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {half}
    assert f"({dtype} weights)" in (out / "README.md").read_text()
    rounded = load_checkpoint(model_pt)
    with torch.no_grad():
        for param in rounded.model.parameters():
            param.copy_(param.to(half).float())
    lines = overfit_pairs[0][:32]
    tokenizer = MarianTokenizer.from_pretrained(out)
    model = MarianMTModel.from_pretrained(out, dtype=torch.float32).eval()
    with torch.inference_mode():
        batch = tokenizer(lines, return_tensors="pt", padding=True)
        ids = model.generate(**batch, num_beams=1, max_new_tokens=MAX_TOKENS + 1).tolist()
    theirs = [row[1:][: row[1:].index(EOS_ID)] for row in ids]
    assert theirs == our_greedy(TorchEngine(rounded, 4096), lines)


def test_generation_config_and_model_card(hf_dir, model_pt):
    """The search travels as the generation config; the card holds the scores, signatures and
    the recipe; weights are safetensors, and nothing of ours is needed to read them."""
    from transformers import GenerationConfig

    generation = GenerationConfig.from_pretrained(hf_dir)
    search = load_checkpoint(model_pt).search or DecodeConfig()
    assert generation.num_beams == (search.beam_size if search.strategy == "beam" else 1)
    assert (generation.decoder_start_token_id, generation.eos_token_id) == (2, EOS_ID)
    assert generation.suppress_tokens == [0, 2]
    card = (hf_dir / "README.md").read_text(encoding="utf-8")
    assert card.startswith('---\nlanguage: ["en", "de"]')
    assert "| test | test_2016_flickr | 1000 | 38.12 | 38.50 | 61.00 |" in card
    assert "`nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:X`" in card
    assert '"value": 38.12' in card and "## Search" in card and "## Training" in card
    assert (hf_dir / "model.safetensors").is_file()
    assert not list(hf_dir.glob("*.pt")) and not (hf_dir / "nmt.json").exists()


def test_pipeline_translation_with_transformers_4(hf_dir, overfit_engine, overfit_pairs):
    """`pipeline("translation", model=DIR)` (transformers 4: 5 removed it) translates as our
    greedy search does, in a process that imports nothing of ours."""
    if not (TRANSFORMERS4 / ".installed").is_file():
        pytest.fail(f"{TRANSFORMERS4} is missing: run `make install`")
    lines = overfit_pairs[0][:12]
    script = (
        "import json, sys, transformers\n"
        "assert transformers.__version__.startswith('4.'), transformers.__version__\n"
        "from transformers import pipeline\n"
        "translate = pipeline('translation', model=sys.argv[1], device='cpu')\n"
        "lines = json.loads(sys.stdin.read())\n"
        f"out = translate(lines, num_beams=1, max_new_tokens={MAX_TOKENS + 1})\n"
        "print(json.dumps([o['translation_text'] for o in out]))\n"
        "assert 'nmt' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(TRANSFORMERS4), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(hf_dir)],
        input=json.dumps(lines).encode(),
        capture_output=True,
        env=env,
        cwd=hf_dir.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    ours = overfit_engine.tokenizer.decode(our_greedy(overfit_engine, lines))
    assert json.loads(done.stdout) == [text.strip() for text in ours]


def test_refusals_are_one_line_and_write_nothing(tmp_path, tiny_tokenizer):
    """A pre-norm model names the field; a quantization HF cannot hold and an evaluation of
    another model are refused; `out` never appears."""

    def small(norm: str) -> Transformer:
        shape = dict(d_model=16, n_heads=2, d_ff=16, encoder_layers=1, decoder_layers=1)
        return Transformer(ModelConfig(vocab_size=tiny_tokenizer.vocab_size, norm=norm, **shape))

    save_checkpoint(tmp_path / "pre.pt", Checkpoint(small("pre"), tiny_tokenizer, "en", "de", {}))
    other = tmp_path / "evaluation.json"
    other.write_text(json.dumps({"checkpoint": {"info": {"experiment": "another"}}}))
    cases = [
        ([f"ckpt={tmp_path / 'pre.pt'}"], "model.norm='pre': MarianMTModel is post-norm"),
        ([f"ckpt={tmp_path / 'pre.pt'}", "quantization=int8"], "quantization='int8' is not one of"),
        ([f"ckpt={tmp_path / 'pre.pt'}", f"evaluation={tmp_path / 'none.json'}"], "not found"),
    ]
    for args, message in cases:
        done = run_module("nmt.export", [*args, "format=hf", f"out={tmp_path / 'out'}"], tmp_path)
        err = done.stderr.decode().strip()
        assert done.returncode != 0 and message in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "out").exists()
    save_checkpoint(tmp_path / "post.pt", Checkpoint(small("post"), tiny_tokenizer, "en", "de", {}))
    args = [f"ckpt={tmp_path / 'post.pt'}", f"evaluation={other}", "format=hf"]
    done = run_module("nmt.export", [*args, f"out={tmp_path / 'out'}"], tmp_path)
    assert "scores another model than" in done.stderr.decode()
    assert not (tmp_path / "out").exists()
