"""Scores (nmt/inference/scores.py, Engine.score, nmt.score, translate scores=true): the model's
log-probs of a given translation, force-decoded, on both engines.

Properties: force-decoding a search's output gives the search's own log-prob (greedy and
beam, both engines); CTranslate2's float32 export scores what torch scores; a pair scores
the same alone or batched; words are the translation's whitespace words; an ensemble of one
model twice is that model; the commands keep one line out per line in."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_module

from nmt.decoding.settings import DecodeConfig
from nmt.inference.scores import scores, word_spans

BEAM = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, length_norm="power")


@pytest.fixture(scope="module")
def lines(overfit_pairs) -> list[str]:
    return [*overfit_pairs[0][:6], "", *overfit_pairs[0][6:14]]


def ended(hyps, engine) -> bool:
    """The search ended this hypothesis with EOS (CTranslate2 takes no EOS step at its limit,
    so its own log-prob of a translation cut there lacks EOS's term)."""
    return len(hyps[0].tokens) < engine.planner.max_positions - 2


@pytest.mark.parametrize("engine_name", ["torch", "ct2"])
@pytest.mark.parametrize("search", [DecodeConfig(), BEAM], ids=["greedy", "beam4"])
def test_force_decoding_a_search_output_gives_the_search_its_own_log_prob(
    engine_name, search, overfit_engine, ct2_f32, lines
):
    engine = overfit_engine if engine_name == "torch" else ct2_f32
    found = engine.translate(lines, search)
    rated = engine.score(lines, [hyps[0].tokens if hyps else [] for hyps in found])
    assert rated[6] is None and found[6] == []
    checked = 0
    for hyps, got in zip(found, rated, strict=True):
        if hyps and ended(hyps, engine):
            assert got.log_prob == pytest.approx(hyps[0].log_prob, abs=1e-3)
            assert len(got.token_log_probs) == len(hyps[0].tokens) + 1
            checked += 1
    assert checked >= 10


def test_ct2_float32_scores_what_torch_scores_and_a_wrong_word_scores_lower(
    overfit_engine, ct2_f32, overfit_pairs
):
    sources, references = overfit_pairs[0][:12], overfit_pairs[1][:12]
    ours, theirs = overfit_engine.score(sources, references), ct2_f32.score(sources, references)
    for a, b in zip(ours, theirs, strict=True):
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-3)
        assert a.words == b.words
    # the overfit model knows these references: a word swapped for another is less likely
    swapped = [ref.replace(ref.split()[1], "Katze", 1) for ref in references]
    worse = overfit_engine.score(sources, swapped)
    lower = sum(w.word_log_probs[1] < o.word_log_probs[1] for w, o in zip(worse, ours, strict=True))
    assert lower >= 10


def test_a_pair_scores_the_same_alone_or_batched_and_words_are_the_text_words(
    overfit_engine, overfit_pairs
):
    sources, references = overfit_pairs[0][:10], overfit_pairs[1][:10]
    together = overfit_engine.score(sources, references)
    for source, reference, batched in zip(sources, references, together, strict=True):
        alone = overfit_engine.score([source], [reference])[0]
        assert alone.token_log_probs == pytest.approx(batched.token_log_probs, abs=1e-5)
        assert batched.words == reference.split()
        assert sum(batched.word_log_probs) + batched.token_log_probs[-1] == pytest.approx(
            batched.log_prob, abs=1e-4
        )


def test_an_ensemble_of_one_model_twice_scores_as_the_model(model_pt, overfit_engine, lines):
    from nmt.inference.torch_engine import TorchEngine

    twice = TorchEngine.load([str(model_pt), str(model_pt)], "cpu", "float32", 4096)
    targets = ["Ein Mann.", "Zwei Hunde spielen im Schnee."]
    pairs = zip(
        twice.score(lines[:2], targets), overfit_engine.score(lines[:2], targets), strict=True
    )
    for a, b in pairs:
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-5)


def test_words_group_pieces_from_each_space():
    assert word_spans(["\u2581Ein", "\u2581Hem", "d", "."]) == [(0, 1), (1, 4)]
    assert word_spans(["\u2581", "\u00c4", "rger", "\u2581ja"]) == [(0, 3), (3, 4)]
    # a trailing space is no word of its own: the words are those of the text's split()
    pieces = ["\u2581Hund", "\u2581", "\u2581"]
    assert len(word_spans(pieces)) == len("".join(pieces).replace("\u2581", " ").split()) == 1
    assert scores(pieces, [-0.1, -0.2, -0.3, -0.4]).word_log_probs == pytest.approx([-0.6])
    got = scores(["\u2581Ein", "\u2581Hem", "d", "."], [-0.1, -0.2, -0.3, -0.4, -0.5])
    assert got.words == ["Ein", "Hemd."] and got.word_log_probs == pytest.approx([-0.1, -0.9])
    assert got.mean_log_prob == pytest.approx(-0.3)
    with pytest.raises(ValueError, match="EOS"):
        scores(["\u2581Ein"], [-0.1])


def test_score_and_translate_scores_write_the_same_columns_line_for_line(
    model_pt, overfit_engine, lines, tmp_path: Path
):
    src, tgt = tmp_path / "src.en", tmp_path / "tgt.de"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    translated = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}", f"input={src}", "scores=true", "progress=false"],
        tmp_path,
    )
    assert translated.returncode == 0, translated.stderr.decode()
    rows = [row.split("\t") for row in translated.stdout.decode().splitlines()]
    assert len(rows) == len(lines) and all(len(row) == 6 for row in rows)  # + the warnings
    assert rows[6] == ["", "", "", "", "", ""] and rows[0][4] == ""  # not calibrated
    tgt.write_text("".join(row[0] + "\n" for row in rows), encoding="utf-8")
    scored = run_module("nmt.score", [f"ckpt={model_pt}", f"src={src}", f"tgt={tgt}"], tmp_path)
    assert scored.returncode == 0, scored.stderr.decode()
    columns = [row.split("\t") for row in scored.stdout.decode().splitlines()]
    assert len(columns) == len(lines)

    def numbers(cells: list[str]) -> list[float]:
        return [float(x) for cell in cells[:3] for x in cell.split()]

    # translate's come from the search, score's from force-decoding: equal to rounding, where
    # text -> pieces gives the search's pieces back (a word or two may re-segment)
    same = [
        c[3] == row[4] and numbers(c) == pytest.approx(numbers(row[1:]), abs=2e-3)
        for c, row in zip(columns, rows, strict=True)
        if row[0]
    ]
    assert sum(same) >= len(same) - 2
    for row in rows:
        if row[0]:
            assert len(row[3].split()) == len(row[0].split())
    tgt.write_text("Ein Mann.\n", encoding="utf-8")
    short = run_module("nmt.score", [f"ckpt={model_pt}", f"src={src}", f"tgt={tgt}"], tmp_path)
    assert short.returncode == 2
    message = short.stderr.decode().strip().splitlines()[-1]
    assert "fewer lines than src" in message and message.endswith("(from line 2)")
    tgt.write_text("Ein Mann.\n" * (len(lines) + 2), encoding="utf-8")
    args = [f"ckpt={model_pt}", f"src={src}", f"tgt={tgt}", "chunk_lines=4"]
    long = run_module("nmt.score", args, tmp_path)
    message = long.stderr.decode().strip().splitlines()[-1]
    assert long.returncode == 2
    assert message.endswith(f"has more lines than src={src} ({len(lines)})")
    both = run_module("nmt.translate", [f"ckpt={model_pt}", "scores=true", "nbest=2"], tmp_path)
    assert both.returncode == 2 and b"scores=true scores the best" in both.stderr


# --- the calibrated confidence (nmt.calibrate, nmt/inference/calibration.py) ---


def test_a_calibration_is_monotone_bounded_and_flat_past_its_ends():
    from nmt.inference.calibration import Calibration

    raw = [-3.0, -2.5, -2.0, -1.5, -1.0, -0.5, -0.2]
    chrf = [0.1, 0.3, 0.2, 0.5, 0.4, 0.9, 0.8]  # noisy, but rising with the score
    fitted = Calibration.fit(raw, chrf, {"lines": 7})
    points = [fitted.confidence(x) for x in [-9.0, *raw, 0.0]]
    assert points == sorted(points) and 0.0 <= points[0] and points[-1] <= 1.0
    assert points[0] == fitted.confidence(-3.0) and points[-1] == fitted.confidence(-0.2)
    assert Calibration.from_info({"confidence": fitted.as_info()}) == fitted
    assert Calibration.from_info({}) is None


def test_calibrate_stores_the_confidence_in_the_model_and_its_export(
    model_pt, overfit_pairs, tmp_path: Path
):
    import shutil

    from nmt.checkpoint import load_checkpoint
    from nmt.ct2.model_dir import export
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.torch_engine import TorchEngine

    model = tmp_path / "model.pt"
    shutil.copy(model_pt, model)
    src, ref = tmp_path / "val.en", tmp_path / "val.de"
    src.write_text("".join(line + "\n" for line in overfit_pairs[0][:40]), encoding="utf-8")
    ref.write_text("".join(line + "\n" for line in overfit_pairs[1][:40]), encoding="utf-8")
    done = run_module("nmt.calibrate", [f"ckpt={model}", f"src={src}", f"ref={ref}"], tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert b"confidence fitted on 40 lines" in done.stderr
    engine = TorchEngine.load([str(model)], "cpu", "float32", 4096)
    assert engine.calibration is not None and engine.calibration.fitted_on["lines"] == 40
    pairs = (overfit_pairs[0][:8], overfit_pairs[1][:8])
    rated = engine.score(*pairs)
    assert all(0.0 <= r.confidence <= 1.0 for r in rated)
    assert [r.confidence for r in rated] == [
        engine.calibration.confidence(r.mean_log_prob) for r in rated
    ]
    exported = export(load_checkpoint(model), tmp_path / "f32", "float32", False)
    ct2 = CTranslate2Engine(exported, "cpu", "default", 1, 1024)
    assert ct2.calibration == engine.calibration
    for a, b in zip(ct2.score(*pairs), rated, strict=True):
        assert a.confidence == pytest.approx(b.confidence, abs=1e-3)
    missing = run_module("nmt.calibrate", [f"ckpt={model}", f"src={src}", "ref=nope"], tmp_path)
    assert missing.returncode == 2 and b"ref=nope not found" in missing.stderr


@pytest.mark.parametrize("search", [DecodeConfig(), BEAM], ids=["greedy", "beam4"])
def test_the_search_keeps_each_tokens_log_prob_as_force_decoding_gives_it(
    search, overfit_engine, lines
):
    """Our searches keep every token's log-prob (so `rate` needs no second pass): they sum to
    the hypothesis' log-prob and equal what force-decoding the output gives."""
    found = overfit_engine.translate(lines, search)
    forced = overfit_engine.score(lines, [h[0].tokens if h else [] for h in found])
    rated = overfit_engine.rate(lines, found)
    for hyps, by_force, own in zip(found, forced, rated, strict=True):
        if not hyps:
            assert by_force is None and own is None
            continue
        assert sum(hyps[0].token_log_probs) == pytest.approx(hyps[0].log_prob, abs=1e-4)
        assert own.token_log_probs == pytest.approx(by_force.token_log_probs, abs=1e-3)
        assert own.words == by_force.words
