"""Word alignments (nmt/inference/alignment.py, translate alignments=true) on both engines:
CTranslate2's float32 export aligns as torch does, a line aligns the same alone or batched,
a forced prefix keeps its alignment, every pair indexes real words, and the output keeps
one line per line, n-best lists included."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import run_module

from nmt.decoding.settings import DecodeConfig
from nmt.inference.alignment import pharaoh, word_alignment, word_of_piece

BEAM = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, length_norm="power")


@pytest.fixture(scope="module")
def lines(overfit_pairs) -> list[str]:
    return [*overfit_pairs[0][:6], "", *overfit_pairs[0][6:12]]


def alignments(engine, lines, search, prefixes=None):
    found = engine.translate(lines, search, prefixes=prefixes, alignments=True)
    return [[(h.tokens, h.alignment) for h in hyps] for hyps in found]


@pytest.mark.parametrize("search", [DecodeConfig(), BEAM], ids=["greedy", "beam4"])
def test_ct2_float32_aligns_as_torch_and_alone_as_batched(search, overfit_engine, ct2_f32, lines):
    ours = alignments(overfit_engine, lines, search)
    assert alignments(ct2_f32, lines, search) == ours
    assert [alignments(overfit_engine, [line], search)[0] for line in lines] == ours
    texts = overfit_engine.tokenizer.decode([hyps[0][0] if hyps else [] for hyps in ours])
    for line, text, hyps in zip(lines, texts, ours, strict=True):
        if not hyps:
            assert not line
            continue
        pairs = hyps[0][1]
        assert pairs and all(
            0 <= s < len(line.split()) and 0 <= t < len(text.split()) for s, t in pairs
        )
        assert {t for _, t in pairs} == set(range(len(text.split())))  # every word linked


def test_a_forced_prefix_keeps_its_alignment(overfit_engine, lines):
    free = alignments(overfit_engine, lines[:4], DecodeConfig())
    texts = overfit_engine.tokenizer.decode([hyps[0][0] for hyps in free])
    prefixes = [" ".join(text.split()[:2]) for text in texts]
    forced = alignments(overfit_engine, lines[:4], DecodeConfig(), prefixes)
    assert forced == free  # the prefix is where greedy went: the same words, the same links


def test_ct2_reads_a_forced_target_in_one_pass_as_a_batch_decodes_it(ct2_f32, overfit_pairs):
    """On the CPU CTranslate2 aligns a given translation in one decoder pass a sentence
    (`align`): the links of the batched forced decode (Engine.align), for targets of many
    lengths, a line without a target, an empty line, and a translation other than the
    model's own (a reference)."""
    from nmt.inference.engine import Engine

    src, ref = overfit_pairs
    lines, targets = [*src[:10], src[10], ""], [*ref[:10], "", "Ein Hund."]
    assert ct2_f32.device == "cpu"
    links = ct2_f32.align(lines, targets)
    assert links == Engine.align(ct2_f32, lines, targets)
    assert links[10] == [] and links[11] is None and all(links[:10])


def test_pieces_map_to_words_and_argmax_links_them():
    assert word_of_piece(["\u2581A", "\u2581ma", "n", "."]) == [0, 1, 1, 1]
    attention = torch.tensor([[0.1, 0.7, 0.1, 0.1], [0.6, 0.2, 0.1, 0.1], [0.0, 0.1, 0.8, 0.1]])
    pairs = word_alignment(["\u2581A", "\u2581do", "g"], ["\u2581Ein", "\u2581Hu", "nd"], attention)
    assert pairs == [(0, 1), (1, 0), (1, 1)] and pharaoh(pairs) == "0-1 1-0 1-1"
    assert word_alignment([], ["\u2581Ein"], attention) == []


def test_translate_alignments_keep_one_line_per_line_on_both_backends(
    model_pt, ct2_f32, lines, tmp_path: Path
):
    source = "".join(line + "\n" for line in lines).encode()
    outputs = {}
    for name, ckpt in (("torch", model_pt), ("ct2", ct2_f32.path)):
        backend = ["backend=ctranslate2"] if name == "ct2" else []
        done = run_module(
            "nmt.translate", [f"ckpt={ckpt}", "alignments=true", *backend], tmp_path, stdin=source
        )
        assert done.returncode == 0, done.stderr.decode()
        assert b"trained without guided alignment" in done.stderr
        outputs[name] = done.stdout.decode().splitlines()
    assert outputs["torch"] == outputs["ct2"] and len(outputs["torch"]) == len(lines)
    assert outputs["torch"][6] == "\t"
    text, links = outputs["torch"][0].split("\t")
    assert all(len(pair.split("-")) == 2 for pair in links.split())
    nbest = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}", "alignments=true", "scores=false", "nbest=2", "decode=beam"],
        tmp_path,
        stdin=source,
    )
    rows = nbest.stdout.decode().splitlines()
    assert len(rows) == len(lines) and len(rows[0].split("\t")) == 6  # 2 x (text, score, links)


def test_aer_counts_sure_and_possible_links_as_och_and_ney(tmp_path: Path):
    from nmt.evaluation.alignment_error import alignment_error

    gold = ["0-0 1-1 2p2", "0-1"]
    result = alignment_error(gold, ["0-0 1-2 2-2", "0-1 1-1"])
    # |A| 5, |S| 3, |A & S| 2, |A & P| 3
    assert (result.precision, result.recall) == pytest.approx((3 / 5, 2 / 3))
    assert result.aer == pytest.approx(1 - 5 / 8)
    assert alignment_error(gold, ["0-0 1-1", "0-1"]).aer == 0.0
    assert alignment_error(["0?0"], ["0-0"]).aer == pytest.approx(0.0)  # a possible link found
    with pytest.raises(ValueError, match="line 2: '1:1'"):
        alignment_error(["0-0", "1-1"], ["0-0", "1:1"])
    (tmp_path / "gold").write_text("\n".join(gold) + "\n")
    (tmp_path / "hyp").write_text("0-0 1-2 2-2\n0-1 1-1\n")
    done = run_module("nmt.aer", [f"gold={tmp_path / 'gold'}", f"hyp={tmp_path / 'hyp'}"], tmp_path)
    assert done.stdout.decode().strip() == "precision 0.6000 recall 0.6667 AER 0.3750 (2 sentences)"


# --- guided alignment (optim.alignment_weight, data.word_alignments) ---


def test_the_aligner_reads_the_words_training_maps_its_links_onto(multi30k_dir, overfit_engine):
    """A tab, a no-break space or a double space splits a line's text into other words than
    its pieces do: the aligner is given the pieces' words (Tokenizer.word_texts), one for one,
    so no link after them shifts (nmt.data.encoding.add_word_alignments)."""
    from nmt.tokenizer import piece_words

    tokenizer = overfit_engine.tokenizer
    starts = tokenizer.word_starts()
    text = (multi30k_dir / "train.de").read_text(encoding="utf-8").splitlines()
    lines = [line for line in text if "\xa0" in line or "  " in line or "\t" in line]
    lines += ["A man\tin red", " leading and trailing  "]
    shifted = 0
    for line, ids in zip(lines, tokenizer.encode(lines), strict=True):
        words = tokenizer.word_texts(ids, starts)
        assert " ".join(words).split() == words and len(words) == len(piece_words(ids, starts))
        shifted += len(line.split()) != len(words)
    print(f"{shifted} of {len(lines)} lines split into other words than their pieces'")
    assert shifted >= 40


def test_guided_alignment_teaches_the_head_the_aligners_links(
    overfit_data, overfit_pairs, overfit_engine, tmp_path: Path
):
    """Trained toward eflomal's links, the alignment head reproduces them far better than the
    raw attention of the same shape trained without; the export aligns as torch does."""
    from conftest import compose_train_config, overfit_training

    from nmt.checkpoint import load_checkpoint
    from nmt.ct2.model_dir import export
    from nmt.data.word_alignment import align_corpus
    from nmt.evaluation.alignment_error import alignment_error
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.torch_engine import TorchEngine
    from nmt.training.fit import train

    guided_args = [
        "data.word_alignments=true",
        "optim.alignment_weight=0.5",
        "model.alignment_heads=1",
        # the head learns its links in 100 updates on two length-sorted batches, as the
        # memorising run's (half the CPU of 70 on one batch of all 64, padded to the longest),
        # at twice its peak rate
        *("data.max_tokens=2048", "optim.warmup_steps=20", "optim.lr_scale=0.3"),
        "trainer.max_steps=100",
    ]
    run = tmp_path / "run"
    train(compose_train_config(overfit_training(overfit_data, tmp_path, *guided_args)), run)
    guided = TorchEngine.load([str(run / "model.pt")], "cpu", "float32", 4096)
    assert guided.model.cfg.alignment_heads == 1
    src, ref = overfit_pairs
    gold = [pharaoh(sorted(pairs)) for pairs in align_corpus(src, ref)]
    links = guided.align(src, ref)
    raw = alignment_error(gold, [pharaoh(a) for a in overfit_engine.align(src, ref)]).aer
    taught = alignment_error(gold, [pharaoh(a) for a in links]).aer
    assert taught < 0.6 * raw, (taught, raw)
    # copied words (names, "in" = "in", numbers) align to their copies
    copies = [
        (n, a.split().index(w), b.split().index(w))
        for n, (a, b) in enumerate(zip(src, ref, strict=True))
        for w in a.split()
        if a.split().count(w) == 1 and b.split().count(w) == 1
    ]
    assert len(copies) >= 10  # "in" (9 times), "Justin", "Bieber."
    linked = sum((i, j) in links[n] for n, i, j in copies)
    assert linked >= 0.9 * len(copies), (linked, copies)
    exported = export(load_checkpoint(run / "model.pt"), tmp_path / "f32", "float32", False)
    ct2 = CTranslate2Engine(exported, "cpu", "default", 1, 1024)
    assert ct2.align(src[:8], ref[:8]) == guided.align(src[:8], ref[:8])
