"""`nmt.import`: a MarianMTModel directory laid out as OPUS-MT's (built here, offline, with
OPUS-MT en-de's configuration at smaller widths) becomes our model.pt, computing what
transformers computes; our own export comes back translating byte for byte the same."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from conftest import compose_train_config, run_module

from nmt.checkpoint import load_checkpoint, save_checkpoint
from nmt.decoding.greedy import greedy_search
from nmt.decoding.settings import DecodeConfig
from nmt.errors import UsageError
from nmt.hf.marian_import import import_marian
from nmt.inference.output_text import best_text
from nmt.inference.torch_engine import TorchEngine
from nmt.split_tokenizer import SplitTokenizer
from nmt.training.init_from import starting_point

pytestmark = pytest.mark.xdist_group("hf_export")
MAX_TOKENS = 20


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    """A unigram model as OPUS-MT's: <unk> 0, <s> 1, </s> 2, no pad."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        character_coverage=1.0,
        minloglevel=2,
    )
    return model.getvalue()


def opus_mt_config(vocab_size: int):
    """OPUS-MT en-de's config.json as published, with widths made small."""
    from transformers import MarianConfig

    pad = vocab_size - 1
    return MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=32,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        decoder_start_token_id=pad,
        dropout=0.1,
    )


def opus_mt_generation(pad: int):
    """OPUS-MT en-de's generation_config.json as published."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
    )


@pytest.fixture(scope="module")
def opus_dir(multi30k_dir: Path, tmp_path_factory) -> Path:
    """A MarianMTModel directory as OPUS-MT's: random weights made large enough to matter,
    a nonzero final_logits_bias, source and target sentencepiece models of their own and one
    vocab.json over both (EOS 0, UNK 1, PAD last)."""
    from transformers import MarianMTModel, MarianTokenizer

    folder = tmp_path_factory.mktemp("opus_mt")
    read = lambda name: (multi30k_dir / name).read_text(encoding="utf-8").splitlines()[:2000]  # noqa: E731
    source, target = train_spm(read("train.en"), 300), train_spm(read("train.de"), 350)
    pieces = ["</s>", "<unk>"]
    for model in (source, target):
        sp = spm.SentencePieceProcessor(model_proto=model)
        pieces += [
            sp.id_to_piece(i)
            for i in range(sp.get_piece_size())
            if not sp.is_control(i) and not sp.is_unknown(i)
        ]
    pieces = list(dict.fromkeys(pieces)) + ["<pad>"]
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    vocab = {piece: i for i, piece in enumerate(pieces)}
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    torch.manual_seed(0)
    hf = MarianMTModel(opus_mt_config(len(pieces))).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "embed_positions" not in name:
                param.add_(torch.randn_like(param) * 0.3)
        hf.final_logits_bias.normal_(0, 1.0)
    hf.generation_config = opus_mt_generation(len(pieces) - 1)
    hf.save_pretrained(folder)
    tokenizer = MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
        source_lang="en",
        target_lang="de",
    )
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def separate_dir(multi30k_dir: Path, tmp_path_factory) -> Path:
    """As `opus_dir`, but with a vocabulary per side as OPUS-MT's newer models have them
    (vocab.json for the source, target_vocab.json for the target, unshared untied
    embeddings): </s> 0, <unk> 1 in both, <pad> last in each; the config's PAD is the
    target's, the decoder's start."""
    from transformers import MarianMTModel, MarianTokenizer

    folder = tmp_path_factory.mktemp("opus_mt_separate")
    read = lambda name: (multi30k_dir / name).read_text(encoding="utf-8").splitlines()[:2000]  # noqa: E731
    models = {
        "source": train_spm(read("train.en"), 400),
        "target": train_spm(read("train.de"), 300),
    }
    sizes = {}
    for side, model in models.items():
        sp = spm.SentencePieceProcessor(model_proto=model)
        pieces = ["</s>", "<unk>"] + [
            sp.id_to_piece(i)
            for i in range(sp.get_piece_size())
            if not sp.is_control(i) and not sp.is_unknown(i)
        ]
        pieces.append("<pad>")
        sizes[side] = len(pieces)
        (folder / f"{side}.spm").write_bytes(model)
        name = "vocab.json" if side == "source" else "target_vocab.json"
        vocab = json.dumps({piece: i for i, piece in enumerate(pieces)}, ensure_ascii=False)
        (folder / name).write_text(vocab, encoding="utf-8")
    config = opus_mt_config(sizes["source"])
    pad = sizes["target"] - 1
    config.update(
        {
            "decoder_vocab_size": sizes["target"],
            "share_encoder_decoder_embeddings": False,
            "tie_word_embeddings": False,
            "pad_token_id": pad,
            "decoder_start_token_id": pad,
        }
    )
    torch.manual_seed(1)
    hf = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "embed_positions" not in name:
                param.add_(torch.randn_like(param) * 0.3)
        hf.final_logits_bias.normal_(0, 1.0)
    hf.generation_config = opus_mt_generation(pad)
    hf.save_pretrained(folder)
    MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
        target_vocab_file=str(folder / "target_vocab.json"),
        separate_vocabs=True,
        source_lang="en",
        target_lang="de",
    ).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def sentences(multi30k_dir: Path) -> list[str]:
    return (multi30k_dir / "val.en").read_text(encoding="utf-8").splitlines()[:24]


def load_engine(path: Path) -> TorchEngine:
    return TorchEngine.load([str(path)], "cpu", "float32", 4096)


def texts(engine: TorchEngine, lines: list[str], search: DecodeConfig) -> list[str]:
    return best_text(engine.tokenizer, engine.translate(lines, search))


def command(module: str, *args: str, cwd: Path) -> None:
    done = run_module(module, list(args), cwd)
    assert done.returncode == 0, done.stderr.decode()


def transformers_side(folder: Path):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(folder).eval(), MarianTokenizer.from_pretrained(folder)


def test_import_keeps_marians_own_settings(opus_dir):
    imported = import_marian(str(opus_dir))
    cfg = imported.model.cfg
    assert (cfg.activation, cfg.output_bias, cfg.tie_embeddings) == ("swish", True, True)
    pad = cfg.vocab_size - 1
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id, imported.tokenizer.unk_id) == (pad, pad, 0, 1)
    assert (imported.src_lang, imported.tgt_lang) == ("en", "de")
    assert (imported.search.strategy, imported.search.beam_size) == ("beam", 4)


def test_tokenizer_gives_marians_ids_and_text(opus_dir, sentences):
    """Source ids as MarianTokenizer's (its EOS aside); target text encoded by the target
    model and joined back as MarianTokenizer joins it."""
    _, theirs = transformers_side(opus_dir)
    ours = import_marian(str(opus_dir)).tokenizer
    assert isinstance(ours, SplitTokenizer)
    expected = [ids[:-1] for ids in theirs(sentences)["input_ids"]]
    assert ours.encode(sentences) == expected
    german = [
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
        "Zwei junge Männer spielen Fußball.",
    ]
    target_ids = ours.target.encode(german)
    assert target_ids == [theirs(text_target=g)["input_ids"][:-1] for g in german]
    decoded = [
        theirs.decode(ids, skip_special_tokens=True, use_source_tokenizer=False)
        for ids in target_ids
    ]
    assert ours.decode(target_ids) == decoded


def test_imported_model_computes_transformers_log_probs_and_greedy(opus_dir, sentences):
    """Teacher-forced log-probs within 2e-5 of MarianMTModel's, padding included, and the same
    greedy tokens."""
    hf, tokenizer = transformers_side(opus_dir)
    model = import_marian(str(opus_dir)).model
    batch = tokenizer(sentences[:8], return_tensors="pt", padding=True)
    pad = model.cfg.pad_id
    tgt = torch.randint(2, model.cfg.vocab_size - 1, (8, 9))
    tgt[:, 0] = pad  # the decoder starts from PAD
    with torch.no_grad():
        theirs = hf(**batch, decoder_input_ids=tgt).logits.log_softmax(-1)
        ours = model(batch["input_ids"], tgt).log_softmax(-1)
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=0)

    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = hf.generate(
            **batch, num_beams=1, do_sample=False, max_new_tokens=MAX_TOKENS + 1
        )
        search = DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_TOKENS)
        found = greedy_search(model, batch["input_ids"], search)
    theirs = [row[1:] for row in generated.tolist()]
    theirs = [[t for t in row if t != pad] for row in theirs]
    theirs = [row[: row.index(0)] if 0 in row else row for row in theirs]
    assert [hyps[0].tokens for hyps in found] == theirs


def test_two_vocabularies_compute_transformers_log_probs_greedy_and_text(
    separate_dir, sentences, tmp_path
):
    """Separate source and target vocabularies in one id space: MarianTokenizer's source
    ids (mapped) and target ids (kept); log-probs of every target piece within 2e-5 of
    transformers', no probability for the source-only ids; greedy tokens as generate's; the
    saved model.pt translates as transformers decodes, on our engine and on CTranslate2."""
    from nmt.ct2.model_dir import export
    from nmt.inference.ct2_engine import CTranslate2Engine

    hf, theirs = transformers_side(separate_dir)
    imported = import_marian(str(separate_dir))
    model, ours = imported.model, imported.tokenizer
    target_size = hf.config.decoder_vocab_size
    assert ours.target_size == target_size and model.cfg.vocab_size > target_size
    as_ours = torch.tensor(ours.source_ids)
    batch = theirs(sentences[:8], return_tensors="pt", padding=True)
    expected = [ids[:-1] for ids in theirs(sentences)["input_ids"]]
    assert ours.encode(sentences) == [as_ours[ids].tolist() for ids in expected]
    german = ["Zwei junge Männer spielen Fußball.", "Ein Hund rennt durch den Schnee."]
    assert ours.target.encode(german) == [theirs(text_target=g)["input_ids"][:-1] for g in german]

    pad = model.cfg.pad_id
    tgt = torch.randint(2, target_size - 1, (8, 9))
    tgt[:, 0] = pad
    with torch.no_grad():
        expected_lp = hf(**batch, decoder_input_ids=tgt).logits.log_softmax(-1)
        ours_lp = model(as_ours[batch["input_ids"]], tgt).log_softmax(-1)
    torch.testing.assert_close(ours_lp[..., :target_size], expected_lp, atol=2e-5, rtol=0)
    assert ours_lp[..., target_size:].exp().max() == 0

    batch = theirs(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = hf.generate(**batch, num_beams=1, max_new_tokens=MAX_TOKENS + 1)
        search = DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_TOKENS)
        found = greedy_search(model, as_ours[batch["input_ids"]], search)
    rows = [[t for t in row[1:] if t != pad] for row in generated.tolist()]
    assert [h[0].tokens for h in found] == [r[: r.index(0)] if 0 in r else r for r in rows]

    out = tmp_path / "model.pt"
    command("nmt.import", f"source={separate_dir}", f"out={out}", cwd=tmp_path)
    # (MarianTokenizer takes the source's <pad> for its special id: the target's is dropped here)
    decoded = theirs.batch_decode(rows, skip_special_tokens=True)
    assert texts(load_engine(out), sentences, search) == decoded
    export(load_checkpoint(out), tmp_path / "ct2", "float32", False)
    ct2 = CTranslate2Engine(str(tmp_path / "ct2"), "cpu", "default", 1, 1024)
    assert texts(ct2, sentences, search) == decoded

    # format=hf writes one vocabulary of the id space; transformers generates the same ids
    command("nmt.export", f"ckpt={out}", f"out={tmp_path / 'hf'}", "format=hf", cwd=tmp_path)
    again, tokenizer = transformers_side(tmp_path / "hf")
    with torch.no_grad():
        batch = tokenizer(sentences, return_tensors="pt", padding=True)
        assert again.generate(**batch, num_beams=1, max_new_tokens=MAX_TOKENS + 1).equal(generated)
    cfg = compose_train_config(["experiment=multi30k_cpu", "budget_bands=[]", f"init_from={out}"])
    with pytest.raises(UsageError, match="separate source and target vocabularies"):
        starting_point(cfg)


def test_import_refuses_what_it_cannot_express(opus_dir, tmp_path):
    """One line naming the field, exit 2, nothing written."""
    bad = tmp_path / "separate"
    bad.mkdir()
    for path in opus_dir.iterdir():
        (bad / path.name).write_bytes(path.read_bytes())
    config = json.loads((bad / "config.json").read_text())
    config["decoder_vocab_size"] = config["vocab_size"] + 5  # yet one shared table
    (bad / "config.json").write_text(json.dumps(config))
    out = tmp_path / "model.pt"
    result = run_module("nmt.import", [f"source={bad}", f"out={out}"], tmp_path)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "decoder_vocab_size" in lines[0], stderr
    assert not out.exists()


def test_imported_model_pt_translates_as_transformers_does(opus_dir, sentences, tmp_path):
    """`nmt.import` writes a model.pt whose translation (through the engine, greedy) is what
    transformers' generate decodes to."""
    out = tmp_path / "model.pt"
    command("nmt.import", f"source={opus_dir}", f"out={out}", cwd=tmp_path)
    search = DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_TOKENS)
    ours = texts(load_engine(out), sentences, search)
    hf, tokenizer = transformers_side(opus_dir)
    with torch.no_grad():
        generated = hf.generate(
            **tokenizer(sentences, return_tensors="pt", padding=True),
            num_beams=1,
            do_sample=False,
            max_new_tokens=MAX_TOKENS + 1,
        )
    theirs = tokenizer.batch_decode(generated, skip_special_tokens=True, use_source_tokenizer=False)
    assert ours == theirs


@pytest.fixture(scope="module")
def our_hf(model_pt, tmp_path_factory) -> Path:
    """The overfit model exported by `nmt.export format=hf`."""
    folder = tmp_path_factory.mktemp("our_hf")
    command("nmt.export", f"ckpt={model_pt}", f"out={folder / 'hf'}", "format=hf", cwd=folder)
    return folder / "hf"


def test_our_export_imports_back_to_the_same_translations(our_hf, model_pt, tmp_path, sentences):
    """Our model -> format=hf -> nmt.import: byte-identical translations, beam search too."""
    back = tmp_path / "back.pt"
    command("nmt.import", f"source={our_hf}", f"out={back}", cwd=tmp_path)
    original, imported = load_engine(model_pt), load_engine(back)
    assert imported.model.cfg.special_ids == original.model.cfg.special_ids
    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=0.6)
    for search in (DecodeConfig(strategy="greedy"), beam):
        assert texts(imported, sentences, search) == texts(original, sentences, search)


def test_what_a_model_learnt_to_read_survives_the_round_trip(our_hf, model_pt, tmp_path):
    """A model trained with placeholders and term annotations reads its source so after
    format=hf and nmt.import too (its info says so; nmt.translation.texts reads it)."""
    taught = load_checkpoint(model_pt)
    taught.info.update(placeholders=True, terms="lemma", terms_in_place=True)
    save_checkpoint(tmp_path / "taught.pt", taught)
    hf_dir, back = tmp_path / "hf", tmp_path / "back.pt"
    command(
        "nmt.export", f"ckpt={tmp_path / 'taught.pt'}", f"out={hf_dir}", "format=hf", cwd=tmp_path
    )
    command("nmt.import", f"source={hf_dir}", f"out={back}", cwd=tmp_path)
    info = load_checkpoint(back).info
    assert (info["placeholders"], info["terms"], info["terms_in_place"]) == (True, "lemma", True)
    assert not import_marian(str(our_hf)).info.get("terms")


def test_imported_checkpoint_saves_and_loads_unchanged(opus_dir, tmp_path, sentences):
    imported = import_marian(str(opus_dir))
    save_checkpoint(tmp_path / "m.pt", imported)
    loaded = load_checkpoint(tmp_path / "m.pt")
    assert loaded.tokenizer.identity == imported.tokenizer.identity
    theirs = imported.model.state_dict()
    assert all(
        torch.equal(weight, theirs[name]) for name, weight in loaded.model.state_dict().items()
    )
    assert loaded.tokenizer.encode(sentences) == imported.tokenizer.encode(sentences)


def test_imported_model_exports_to_ctranslate2_with_equal_greedy(opus_dir, sentences, tmp_path):
    """The imported model (swish, logits bias, Marian's ids, two sentencepiece models) as a
    CTranslate2 float32 directory: the same greedy translations as the torch engine."""
    from nmt.ct2.model_dir import export
    from nmt.inference.ct2_engine import CTranslate2Engine

    out = tmp_path / "model.pt"
    save_checkpoint(out, import_marian(str(opus_dir)))
    torch_engine = load_engine(out)
    export(load_checkpoint(out), tmp_path / "ct2", "float32", False)
    ct2 = CTranslate2Engine(str(tmp_path / "ct2"), "cpu", "default", 1, 1024)
    search = DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_TOKENS)
    assert texts(ct2, sentences, search) == texts(torch_engine, sentences, search)


def test_imported_model_exports_back_to_transformers_unchanged(opus_dir, sentences, tmp_path):
    """Imported, then `format=hf` again: transformers loads it and generates what the
    original directory generates (swish, the logits bias and Marian's ids carried back)."""
    save_checkpoint(tmp_path / "model.pt", import_marian(str(opus_dir)))
    command(
        "nmt.export", f"ckpt={tmp_path / 'model.pt'}", f"out={tmp_path / 'hf'}", "format=hf",
        cwd=tmp_path,
    )  # fmt: skip
    outputs = []
    for folder in (opus_dir, tmp_path / "hf"):
        hf, tokenizer = transformers_side(folder)
        batch = tokenizer(sentences, return_tensors="pt", padding=True)
        with torch.no_grad():
            generated = hf.generate(**batch, num_beams=1, max_new_tokens=MAX_TOKENS + 1)
        outputs.append(generated.tolist())
    assert outputs[0] == outputs[1]


def test_imported_model_serves_scores_aligns_and_translates_pages(opus_dir, sentences, tmp_path):
    """The imported model.pt where ours goes: translate's scores and alignments (one line out
    per line in, each word linked within the sentence), the server's API giving translate's
    text, and an HTML page coming back with its tags."""
    from conftest import compose, worker_answers

    from nmt.serving.api import TranslationAPI

    out = tmp_path / "model.pt"
    save_checkpoint(out, import_marian(str(opus_dir)))
    lines = sentences[:6]
    stdin = "".join(line + "\n" for line in lines).encode()
    plain = run_module("nmt.translate", [f"ckpt={out}"], tmp_path, stdin=stdin)
    assert plain.returncode == 0, plain.stderr.decode()
    offline = plain.stdout.decode().splitlines()
    rows = run_module(
        "nmt.translate", [f"ckpt={out}", "alignments=true", "scores=true"], tmp_path, stdin=stdin
    )
    assert rows.returncode == 0, rows.stderr.decode()
    for line, row, text in zip(lines, rows.stdout.decode().splitlines(), offline, strict=True):
        fields = row.split("\t")
        assert fields[0] == text and float(fields[2]) < 0  # the text, its log-prob
        links = [tuple(map(int, pair.split("-"))) for pair in fields[-1].split()]
        assert links and all(i < len(line.split()) and j < len(text.split()) for i, j in links), (
            fields
        )

    api = TranslationAPI(
        compose("serve", [f"ckpt={out}", "threads=1", "cache_sentences=0"]), [], "x"
    )
    api.setup("cpu")

    def served(body: dict) -> list[str]:
        return worker_answers(api, [body])[0]["translation"]

    assert served({"text": lines}) == offline
    page = served({"text": f"<p>{lines[0]} <b>{lines[1]}</b></p>", "format": "html"})
    assert page.startswith("<p>") and "<b>" in page and page.endswith("</p>")
