"""Glossaries (nmt.terms.glossary, nmt.terms.placing): read strictly, found at word boundaries
in any inflection, used on both engines, and reported through every door."""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace

import pytest
from conftest import run_module

from nmt.decoding.penalties import normalized_score
from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import SearchError
from nmt.inference.output_text import best_text, model_line
from nmt.terms.glossary import Entry, Glossary, GlossaryError, core
from nmt.translation.texts import translate_texts


def sources(glossary: Glossary, sentence: str) -> list[str]:
    return [m.entry.source for m in glossary.find(sentence)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("bike\tFahrrad\nhelmet Helm\n", "g.tsv line 2: 0 tabs"),
        ("# terms\n\nbike\tFahrrad\tRad\n", "g.tsv line 3: 2 tabs"),
        ("bike\t \n", "g.tsv line 1: an empty target term"),
        ("\tRad\n", "g.tsv line 1: an empty source term"),
        ("bike\t" + "x" * 201 + "\n", "a term over 200 characters"),
    ],
)
def test_a_malformed_glossary_names_its_file_and_line(text, message):
    with pytest.raises(GlossaryError, match=message) as error:
        Glossary.parse(text, "g.tsv")
    assert "\n" not in str(error.value)


def test_terms_are_found_at_word_boundaries_in_their_case_and_any_inflection():
    glossary = Glossary.parse(
        "bike\tFahrrad\nred shirt\trotes Hemd\nshirt\tHemd\nApple\tApple\ncontract\tVertrag\n",
        "g.tsv",
    )
    assert sources(glossary, "Bikers ride bikes, one bike.") == ["bike", "bike"]
    assert sources(glossary, "A man in red shirts signs contracts.") == ["red shirt", "contract"]
    assert sources(glossary, "A shirt and an apple, not an Apple.") == ["shirt", "Apple"]
    assert sources(glossary, "No bike-sharing, no motorbikes.") == []
    assert [m.words for m in glossary.find("Two red shirts")] == [range(1, 3)]
    forms = Glossary.parse("man\tMann\nmen\tMänner\n", "g.tsv")  # a form before a lemma
    assert sources(forms, "Men and a man, two men.") == ["men", "man", "men"]
    assert sources(Glossary.parse("man\tMann\n", "g.tsv"), "Two men.") == ["man"]
    dotted = Glossary.parse("ACME Inc.\tACME AG\n", "g.tsv")
    assert sources(dotted, "ACME Inc. sells bikes.") == ["ACME Inc."]
    assert glossary.uses("Er unterschreibt die Verträge.", "Vertrag")
    assert glossary.uses("Der Vertrag - „unterschrieben“.", "Vertrag")  # words of punctuation
    assert glossary.uses("Ein rotes Hemd.", "rotes Hemd")
    assert not glossary.uses("Ein Hemd, rot.", "rotes Hemd")


def test_lemmas_come_from_a_trie_cached_whole_on_disk_and_match_simplemmas_own(
    tmp_path, monkeypatch
):
    import simplemma

    from nmt.terms import lemmas

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    words = "contracts men bikes riding children geese was better".split()
    try:
        for fresh in range(2):  # the first builds and writes the cache, the second reads it
            lemmas.dictionaries.cache_clear()
            lemmas.lemmatizer.cache_clear()
            if not fresh:
                lemmas.load(("en",))
            assert [lemmas.lemmatize(w, "en") for w in words] == [
                simplemma.lemmatize(w, lang="en") for w in words
            ]
            assert lemmas.dictionaries().loaded == {"en"}
            cached = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
            assert cached == ["en.dic"], fresh  # written whole, under its name: no partial file
        # a cache directory that cannot be made: the tries are built in the process alone
        # (Malay's, built in 0.04 s where English's takes 0.8)
        blocked = tmp_path / "a file"
        blocked.write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))
        lemmas.dictionaries.cache_clear()
        lemmas.lemmatizer.cache_clear()
        assert [lemmas.lemmatize(w, "ms") for w in ("bermain", "rumah-rumah")] == ["main", "rumah"]
        assert lemmas.dictionaries().loaded == {"ms"}
    finally:  # the process's own, in the user's cache directory, for the other tests
        monkeypatch.undo()  # first: the dictionaries read the cache directory as they start
        lemmas.dictionaries.cache_clear()
        lemmas.lemmatizer.cache_clear()
    assert lemmas.lemmatize("Verträgen", "de") == "Vertrag"


def test_a_later_entry_and_a_requests_win_a_shared_source_term():
    server = Glossary([Entry("bike", "Rad"), Entry("bike", "Fahrrad"), Entry("dog", "Hund")])
    assert [e.target for e in server.entries] == ["Fahrrad", "Hund"]
    mine = server.under(Glossary.of_request({"dog": "Köter", "cat": "Katze"}))
    found = mine.find("A dog, a bike and a cat.")
    assert [(m.entry.source, m.entry.target) for m in found] == [
        ("dog", "Köter"),
        ("bike", "Fahrrad"),
        ("cat", "Katze"),
    ]
    assert len(mine) == 3 and mine.base is server  # the server's, neither copied nor re-indexed
    with pytest.raises(GlossaryError, match="at most 1000"):
        Glossary.of_request({f"w{i}": "x" for i in range(1001)})


def test_a_request_glossary_over_the_servers_finds_what_one_glossary_of_both_finds(
    overfit_pairs,
):
    """On real sentences: the server's entries then the request's, some overriding, some
    overlapping (longer terms, other forms), layered or built as one glossary."""
    server = Glossary.of_request(
        {"man": "Mann", "men": "Männer", "two young": "zwei junge", "shirt": "Hemd", "a": "ein"}
    )
    own = Glossary.of_request({"man": "Herr", "young guys": "junge Kerle", "Two": "Zwei"})
    layered, whole = server.under(own), Glossary(server.entries + own.entries)
    for sentence in overfit_pairs[0]:
        assert layered.find(sentence) == whole.find(sentence), sentence
    assert len(layered) == len(whole) == 7


def test_a_glossary_that_would_make_finding_terms_costly_is_refused():
    """A sentence's words are looked up, not the glossary's entries scanned: a run of words
    checks at most 4 entries, and no term is over 8 words."""
    forms = {"bike": "a", "Bike": "b", "bikes": "c", "Bikes": "d", "BIKE": "e"}
    with pytest.raises(GlossaryError, match="over 4 entries are forms of 'BIKE'"):
        Glossary.of_request(forms)
    with pytest.raises(GlossaryError, match="a source term over 8 words"):
        Glossary.of_request({" ".join(["a"] * 9): "x"})
    many = Glossary.of_request({f"a b{i}": f"x{i}" for i in range(1000)})
    assert sources(many, "a b7 and a b999, " + "a " * 500) == ["a b7", "a b999"]


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine):
    return overfit_engine if request.param == "torch" else request.getfixturevalue("ct2_f32")


TERMS = "bushes\tSträucher\nhard hats\tHelmen\n"


def test_both_engines_use_the_terms_and_leave_other_lines_alone(engine, overfit_pairs):
    """The memorised lines hold 'bushes' (the model writes Büsche) and 'hard hats' (it writes
    Schutzhelmen): each translation uses the glossary's term instead, says so, and a line
    without a term translates as without a glossary, alone or in a batch."""
    glossary = Glossary.parse(TERMS, "g.tsv")
    lines = overfit_pairs[0][:3]
    # unsteered: the memorised model, steered to a term, loses its way after it (the steered
    # search is test_the_torch_search_is_steered_to_the_terms_by_term_bonus's)
    search = replace(engine.search, term_bonus=0.0)
    plain = translate_texts(engine, lines, search)
    found = translate_texts(engine, lines, search, glossary=glossary)
    assert "Büsche" in plain[0].text and "Sträucher" in found[0].text, found[0].text
    assert "Helmen" in found[1].text.replace("Schutzhelmen", ""), found[1].text
    assert found[0].terms == [{"source": "bushes", "target": "Sträucher", "used": True}]
    assert found[1].terms == [{"source": "hard hats", "target": "Helmen", "used": True}]
    assert found[0].warnings == [] and found[1].warnings == []
    assert found[2].text == plain[2].text and found[2].terms == []
    alone = translate_texts(engine, lines[1:2], search, glossary=glossary)[0]
    assert alone.text == found[1].text


def test_an_annotated_line_is_batched_and_limited_as_the_sentence_it_annotates(
    engine, overfit_pairs
):
    """Annotation adds marks and terms, not sentence: planned `sized_as` the sentences given,
    the annotated lines go out in the batches and with the output limits those sentences
    would have, holding their own (longer) pieces; unsized, they would not."""
    from nmt.inference.planner import rows_per_sentence
    from nmt.terms.annotation import annotate

    glossary = Glossary.parse(TERMS + "man\tMann\nwoman\tFrau\n", "g.tsv")
    lines = [line for line in overfit_pairs[0] if glossary.find(line)][:6]
    annotated = [annotate(line, glossary.find(line), "lemma").text for line in lines]
    assert len(lines) >= 3 and all(a != line for a, line in zip(annotated, lines, strict=True))
    planner, search = engine.planner, engine.search
    budget = planner.max_tokens
    try:
        longest = max(len(ids) + 1 for ids in engine.tokenizer.encode(lines))
        planner.max_tokens = 3 * longest * rows_per_sentence(search)  # ~3 sentences a batch
        given = planner.plan(lines, search)
        sized = planner.plan(annotated, search, sized_as=lines)
        unsized = planner.plan(annotated, search)
    finally:
        planner.max_tokens = budget
    assert [b.lines for b in sized] == [b.lines for b in given]
    assert [b.max_lengths for b in sized] == [b.max_lengths for b in given]
    ids = engine.tokenizer.encode(annotated)
    assert [s for b in sized for s in b.sources] == [
        ids[i] + [engine.tokenizer.eos_id] for b in sized for i in b.lines
    ]
    assert [b.max_lengths for b in unsized] != [b.max_lengths for b in given]
    rows = rows_per_sentence(search)  # the budget, overrun at most twice
    for batch in sized:
        padded = max(len(s) for s in batch.sources) * len(batch.sources) * rows
        assert len(batch.lines) == 1 or padded <= 2 * 3 * longest * rows


class TermReader:
    """`engine` as a model trained with data.augment.terms (its model.pt says so) would be:
    the same translations of what it reads, and a record of what it was given to read."""

    def __init__(self, engine, form: str, in_place: bool = False):
        self.engine, self.read, self.sized_as = engine, [], []
        self.info = {**engine.info, "terms": form, "terms_in_place": in_place}

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def translate(self, lines, *args, **kwargs):
        self.read += lines
        self.sized_as += kwargs.get("sized_as") or lines
        return self.engine.translate(lines, *args, **kwargs)


def test_a_model_that_learnt_terms_reads_them_annotated_on_both_engines(engine, overfit_pairs):
    """Each term is annotated after its source words, in the lemma form (or as given), once
    per sentence and in one decoding (nothing placed: term_place off); the translation's
    alignment indexes the sentence's own words; a term is reported used exactly when the
    translation holds it; a line alone reads and translates as in the batch; a line without a
    term is read as it is."""
    glossary = Glossary.parse(TERMS, "g.tsv")
    lines = overfit_pairs[0][:3]
    search = replace(engine.search, term_place="off")
    for form, annotation in (
        ("lemma", ["bushes %% Strauch %%", "hats %% Helm %%"]),
        ("exact", ["bushes %% Sträucher %%", "hats %% Helmen %%"]),
    ):
        reader = TermReader(engine, form)
        found = translate_texts(reader, lines, search, glossary=glossary, alignments=True)
        assert len(reader.read) == 3 and reader.read[2] == lines[2]
        assert reader.sized_as == lines  # batched and limited as the sentences given
        for j in (0, 1):
            assert annotation[j] in reader.read[j], reader.read[j]
            assert reader.read[j].replace(annotation[j], annotation[j].split()[0]) == lines[j]
            (term,) = found[j].terms
            assert term["used"] == glossary.uses(found[j].text, term["target"])
            words = len(lines[j].split())
            assert found[j].alignments and all(s < words for s, _ in found[j].alignments[0])
        assert found[2].terms == []
        alone = TermReader(engine, form)
        one = translate_texts(alone, lines[1:2], search, glossary=glossary)[0]
        assert alone.read == reader.read[1:2] and one.text == found[1].text
    # a model trained with data.augment.term_mask reads the term in place of its words
    reader = TermReader(engine, "lemma", in_place=True)
    found = translate_texts(reader, lines, search, glossary=glossary, alignments=True)
    for j, (source, term) in enumerate((("bushes", "Strauch"), ("hard hats", "Helm"))):
        assert f"%% {term} %%" in reader.read[j] and source not in reader.read[j]
        assert reader.read[j].replace(f"%% {term} %%", source) == lines[j]
        words = len(lines[j].split())
        assert found[j].alignments and all(s < words for s, _ in found[j].alignments[0])
    assert reader.read[2] == lines[2]


def test_translations_rank_by_the_terms_they_use_then_as_given():
    glossary = Glossary.parse(TERMS, "g.tsv")
    texts = ["Ein Mann vor Büschen.", "Ein Mann vor Sträuchern.", "Männer mit Helmen vor Strauch."]
    assert glossary.rank(texts, ["Sträucher", "Helmen"]) == [2, 1, 0]
    assert glossary.rank(texts, ["Sträucher"]) == [1, 2, 0]
    assert glossary.rank(texts, ["Katze"]) == [0, 1, 2]


class Recorder(TermReader):
    """An annotating engine that keeps what it last found and was asked for."""

    def translate(self, lines, *args, **kwargs):
        found = super().translate(lines, *args, **kwargs)
        self.found = [[h.tokens for h in nbest] for nbest in found]
        self.hypotheses = kwargs.get("hypotheses", 0)
        return found


def test_an_annotating_models_best_is_the_beams_best_that_uses_the_most_terms(
    engine, overfit_pairs
):
    """With term_choice (the default), the search gives a line holding terms its finished
    hypotheses (up to beam_size), and the first that uses the most of its terms comes first,
    the others after it in the search's order, up to nbest; a line without terms gets the
    search's own n best; off, the search's own order."""
    glossary = Glossary.parse(TERMS + "man\tMann\nwoman\tFrau\n", "g.tsv")
    lines = overfit_pairs[0][:4]
    search = replace(engine.search, term_place="off")  # the search's hypotheses, none placed
    assert search.strategy == "beam" and search.beam_size >= 3 and search.term_choice
    for nbest in (1, 2):
        reader = Recorder(engine, "lemma")
        chosen = translate_texts(reader, lines, replace(search, nbest=nbest), glossary=glossary)
        assert reader.hypotheses == search.beam_size
        for j, line in enumerate(lines):
            texts = [model_line(t) for t in engine.tokenizer.decode(reader.found[j])]
            targets = [m.entry.target for m in glossary.find(line)]
            order = glossary.rank(texts, targets) if targets else range(len(texts))
            assert [t for t, _ in chosen[j].alternatives] == [texts[h] for h in order][:nbest]
            assert [t["used"] for t in chosen[j].terms] == [
                glossary.uses(chosen[j].text, target) for target in targets
            ]
    reader = Recorder(engine, "lemma")
    own = translate_texts(reader, lines, replace(search, term_choice=False), glossary=glossary)
    assert reader.hypotheses == 0
    firsts = [[Hypothesis(found[0], 0.0, 0.0)] for found in reader.found]
    assert [t.text for t in own] == best_text(engine.tokenizer, firsts)


class Offering(TermReader):
    """An annotating engine whose second best hypothesis of every line is `offer`, scored
    below its best; it records the hypotheses it was asked for."""

    def __init__(self, engine, offer: str, form: str | None = "lemma"):
        super().__init__(engine, form)
        self.ids, self.asked = engine.tokenizer.encode([offer])[0], []

    def translate(self, lines, *args, **kwargs):
        self.asked.append(kwargs.get("hypotheses", 0))
        found = super().translate(lines, *args, **kwargs)
        for nbest in found:
            best = nbest[0]
            nbest.insert(1, Hypothesis(self.ids, best.score - 1.0, best.log_prob - 1.0))
        return found


def test_a_worse_hypothesis_that_uses_the_term_is_chosen_over_the_best_that_does_not(
    engine, overfit_pairs
):
    """The model writes Büsche for 'bushes'; offered a worse hypothesis with the glossary's
    Sträucher, term_choice takes it and reports the term used; off, the best stays, or with
    term_place the term is placed in a second decoding, which reads the line as the first
    did: annotated for a model that reads terms, as given for one that does not."""
    glossary = Glossary.parse(TERMS, "g.tsv")
    line = overfit_pairs[0][0]
    search = replace(engine.search, term_bonus=0.0, term_place="off")  # no steering, no placing
    best = translate_texts(engine, [line], search)[0].text
    assert "Büsche" in best
    offering = Offering(engine, best.replace("Büsche", "Sträucher"))
    (offer,) = engine.tokenizer.decode([offering.ids])
    chosen = translate_texts(offering, [line], search, glossary=glossary)[0]
    assert chosen.text == offer and chosen.terms[0]["used"]
    assert offering.asked == [search.beam_size]
    off = replace(search, term_choice=False)
    kept = translate_texts(offering, [line], off, glossary=glossary)
    assert kept[0].text != offer and not kept[0].terms[0]["used"]
    assert offering.asked[1:] == [0]
    # placed: only where no finished hypothesis has the term, and the line read as at first
    placing = replace(search, term_place="decode")
    for form in ("lemma", None):
        offering = Offering(engine, best.replace("Büsche", "Sträucher"), form=form)
        chosen = translate_texts(offering, [line], placing, glossary=glossary)[0]
        assert chosen.text == offer and offering.asked == [search.beam_size]  # no placing
        placed = translate_texts(
            offering, [line], replace(placing, term_choice=False), glossary=glossary
        )
        assert placed[0].terms[0]["used"] and offering.asked[1:] == [0, 0]  # decoded, placed
        assert offering.read[1:] == [offering.read[0]] * 2 and offering.sized_as == [line] * 3
        assert ("%% Strauch %%" in offering.read[0]) == (form == "lemma")


class Gluing:
    """`engine`, except that a forced prefix that does not end in a space is written on into
    a longer word ("Sträucher" + "chen"); it records the prefixes of each call."""

    def __init__(self, engine):
        self.engine, self.prefixes = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def translate(self, lines, search, first_line_number=1, prefixes=None, **kwargs):
        self.prefixes.append(prefixes)
        if prefixes:
            prefixes = [p + "chen" if p and not p.endswith(" ") else p for p in prefixes]
        return self.engine.translate(lines, search, first_line_number, prefixes, **kwargs)


def test_a_term_glued_into_a_longer_word_is_placed_again_its_word_ended(engine, overfit_pairs):
    """A placed term the search writes on into a longer word ("Sträucherchen" uses no
    "Sträucher") is placed once more, its prefix ending in a space: on either engine the next
    token starts a word, so the term is written whole and used."""
    glossary = Glossary.parse(TERMS, "g.tsv")
    line = overfit_pairs[0][0]
    gluing = Gluing(engine)
    search = replace(engine.search, term_bonus=0.0, term_place="decode")  # placed
    found = translate_texts(gluing, [line], search, glossary=glossary)[0]
    first, glued, ended = gluing.prefixes
    assert first is None and glued[0].endswith("Sträucher") and ended == [glued[0] + " "]
    assert re.search(r"Sträucher\b", found.text) and found.terms[0]["used"], found.text
    assert found.warnings == []


def test_a_sentences_lacking_terms_are_written_into_one_prefix_up_to_the_last():
    """Each lacking term replaces the words aligned to its source words (a run of them), the
    words between kept; a term with no aligned word goes in past its aligned neighbour; one
    whose place an earlier term took goes in after it; the prefix stops at the last term."""
    from nmt.terms.glossary import Match
    from nmt.terms.placing import prefix_for

    source = "Two young males sit near many green bushes ."
    translation = "Zwei junge Männer sitzen in der Nähe vieler grüner Büsche ."
    links = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (4, 5), (4, 6), (5, 7), (6, 8), (7, 9)]
    links.append((8, 10))

    def match(word: str, target: str, words: range | None = None) -> Match:
        at = source.split().index(word)
        return Match(Entry(word, target), words or range(at, at + 1))

    males, bushes = match("males", "Jungs"), match("bushes", "Sträucher")
    prefix, placed = prefix_for(translation, [bushes, males], links)
    assert prefix == "Zwei junge Jungs sitzen in der Nähe vieler grüner Sträucher"
    assert placed == [males, bushes]  # in the translation's order
    near = match("near", "bei")  # aligned to a run of three words: all three replaced
    prefix, placed = prefix_for(translation, [near, bushes], links)
    assert prefix == "Zwei junge Männer sitzen bei vieler grüner Sträucher"
    unaligned = [pair for pair in links if pair[0] != 2]  # males: after "junge"
    assert prefix_for(translation, [males], unaligned)[0] == "Zwei junge Jungs"
    both = match("young", "jungen", range(1, 3))  # "young males", over Männer's place
    prefix, placed = prefix_for(translation, [both, males], links)
    assert prefix == "Zwei jungen Jungs" and placed == [both, males]  # males after it
    first = match("Two", "zwei")
    assert prefix_for(translation, [first], links)[0] == "Zwei"  # capitalised at the start
    end = match(".", "!")
    assert prefix_for(translation, [end], links)[0] == translation[:-1] + "!"  # never past


def test_terms_written_in_keep_the_words_after_the_last_and_the_punctuation_around():
    """term_place=edit's text: the terms as in the prefix, then the rest of the translation
    as it was; a replaced word's punctuation stays around the term (in a prefix too); no
    term over the words of a used term or of a span's placeholder."""
    from nmt.terms.glossary import Match
    from nmt.terms.placing import held_words, prefix_for, written_in

    translation = "Zwei junge Männer, sitzen bei (vielen) Büschen."
    links = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]
    males = Match(Entry("males", "Jungs"), range(2, 3))
    many = Match(Entry("many", "einigen"), range(5, 6))
    bushes = Match(Entry("bushes", "Sträucher"), range(6, 7))
    assert (
        written_in(translation, [males], links) == "Zwei junge Jungs, sitzen bei (vielen) Büschen."
    )
    assert written_in(translation, [many, bushes], links) == (
        "Zwei junge Männer, sitzen bei (einigen) Sträucher."
    )
    assert prefix_for(translation, [males], links)[0] == "Zwei junge Jungs,"
    assert written_in(translation, [], links) == translation
    # two terms aligned to one word: both written, in their order, the punctuation after both;
    # a word that writes a term the translation uses is kept, the other term before it
    translation, links = "Ein Mann fährt ein altes Rennauto.", [(i, i) for i in range(5)]
    links += [(5, 5), (6, 5)]  # race car -> Rennauto
    race, car = (
        Match(Entry("race", "Rennen"), range(5, 6)),
        Match(Entry("car", "Auto"), range(6, 7)),
    )
    assert written_in(translation, [race, car], links) == "Ein Mann fährt ein altes Rennen Auto."
    assert written_in("Er fährt ein Auto.", [race], [(0, 0), (5, 3), (6, 3)], {3}) == (
        "Er fährt ein Rennen Auto."
    )
    # the words placing keeps: a used term's, and a protected span's placeholder
    glossary = Glossary([Entry("car", "Auto"), Entry("race", "Rennen")])
    assert held_words(glossary, "Er fährt #1 Autos zu #2.", [car, race]) == {2, 3, 5}


def test_term_place_reads_a_models_stored_true_or_false_and_refuses_other_words():
    """Models stored term_place as true/false before "edit": they place as they did."""
    from nmt.decoding.settings import DecodeConfig

    assert DecodeConfig(term_place=True).term_place == "decode"
    assert DecodeConfig(term_place=False).term_place == "off"
    with pytest.raises(ValueError, match="decode.term_place must be one of decode, edit, off"):
        DecodeConfig(term_place="on")


def test_edit_writes_a_lines_lacking_terms_in_without_a_second_search(engine, overfit_pairs):
    """term_place=edit, on either engine: a line lacking two terms gets both written into
    every hypothesis of its n-best with no search after the first, the words after the last
    as they were; each is rated as the model rates the text forced (scores, alignment), so
    an edited translation reads as any other."""
    from nmt.terms.placing import written_in

    glossary = Glossary.parse("males\tJungs\nbushes\tSträucher\n", "g.tsv")
    line = overfit_pairs[0][0]
    search = replace(engine.search, term_bonus=0.0, term_place="edit", nbest=2)
    plain = translate_texts(engine, [line], search)[0]
    assert "Männer" in plain.text and "Büsche" in plain.text, plain.text
    calls = Calls(engine)
    found = translate_texts(calls, [line], search, glossary=glossary, **RATED)[0]
    assert calls.prefixes == [None], calls.prefixes  # the search, and no other
    # where the model's own alignment puts them (a memorised model's: not a good one)
    links = engine.align([line], [plain.text])[0]
    assert found.text == written_in(plain.text, glossary.find(line), links)
    assert [t["used"] for t in found.terms] == [True] * 2, found.text
    assert all("Jungs" in text and "Sträucher" in text for text, _ in found.alternatives)
    (forced,) = engine.score([line], [found.text])
    assert found.scores.token_log_probs == pytest.approx(forced.token_log_probs, abs=1e-4)
    run = engine.runnable(search)[0]  # ranked as the search ranks: its length penalty
    lp = normalized_score(forced.log_prob, len(forced.pieces), run.len_penalty, run.length_norm)
    assert found.alternatives[0][1] == pytest.approx(lp, abs=1e-3)
    assert found.alignments[0] == engine.align([line], [found.text])[0]


RATED = {"alignments": True, "scores": True}


def test_edit_rates_a_written_text_only_where_an_output_shows_its_score(
    engine, overfit_pairs, monkeypatch
):
    """term_place=edit with one best and no scores asked for: the edited text is not forced
    through the model (no score is shown), its score NaN, not the unedited text's; the text is
    the one a rated run writes, and asked for later, its scores are the forced pass's."""
    glossary = Glossary.parse("males\tJungs\nbushes\tSträucher\n", "g.tsv")
    line = overfit_pairs[0][0]
    search = replace(engine.search, term_bonus=0.0, term_place="edit", nbest=1)
    rated = translate_texts(engine, [line], search, glossary=glossary, scores=True)[0]
    scored = []
    score = engine.score
    monkeypatch.setattr(engine, "score", lambda lines, *a: scored.append(lines) or score(lines, *a))
    found = translate_texts(engine, [line], search, glossary=glossary)[0]
    assert scored == [] and found.text == rated.text and "Jungs" in found.text, found.text
    assert math.isnan(found.alternatives[0][1])
    (forced,) = score([line], [rated.text])
    assert rated.scores.token_log_probs == pytest.approx(forced.token_log_probs, abs=1e-4)
    assert not math.isnan(rated.alternatives[0][1])


def test_all_of_a_lines_lacking_terms_are_placed_in_one_decode(engine, overfit_pairs):
    """A line that lacks two terms is decoded once more, not once per term: its prefix holds
    both, and its translation uses both, on either engine."""
    glossary = Glossary.parse("males\tJungs\nbushes\tSträucher\n", "g.tsv")
    line = overfit_pairs[0][0]
    calls = Calls(engine)
    search = replace(engine.search, term_bonus=0.0, term_place="decode")  # placed
    found = translate_texts(calls, [line], search, glossary=glossary)[0]
    # the translation, then one placing of both; a later call only places a term again whose
    # word the search wrote on into a longer one, its prefix ended in a space
    placing = calls.prefixes[1][0]
    assert (
        "Jungs" in placing and "Sträucher" in placing and placing.endswith(("Jungs", "Sträucher"))
    )
    assert all(p[0].endswith(" ") for p in calls.prefixes[2:]), calls.prefixes
    assert [t["used"] for t in found.terms] == [True, True], found.text


@pytest.mark.parametrize("how", ["decode", "edit"])
def test_after_steering_only_a_glued_term_is_placed(engine, overfit_pairs, how):
    """After a search steered to the terms, placing (glued_only) takes only a term the
    translation wrote on into a longer word, and places it at once with its word ended (or
    writes it in, with no search); a term the translation does not hold at all is left
    (reported, not placed)."""
    from nmt.terms.placing import place_terms

    glossary = Glossary.parse(TERMS, "g.tsv")
    line = overfit_pairs[0][0]
    matches = [glossary.find(line)]
    best = translate_texts(engine, [line], engine.search)[0].text
    search = replace(engine.search, term_place=how)
    for text, placed in ((best.replace("Büsche", "Sträucherchen"), True), (best, False)):
        found = [[Hypothesis(engine.tokenizer.encode([text])[0], 0.0, 0.0)]]
        gluing = Gluing(engine)
        args = (search, [line], [None], matches, found, [1], glossary, False, False)
        place_terms(gluing, *args, glued_only=True)
        (written,) = engine.tokenizer.decode([found[0][0].tokens])
        if placed and how == "decode":
            assert len(gluing.prefixes) == 1 and gluing.prefixes[0][0].endswith("Sträucher ")
        if placed:
            assert re.search(r"Sträucher\b", written), written
            assert how == "decode" or gluing.prefixes == []  # written in: no search
        else:
            assert gluing.prefixes == [] and written == text


class Calls:
    """`engine` as it is, with a record of the `steer`, the search's stop and the prefixes of
    each `translate` call."""

    def __init__(self, engine):
        self.engine, self.steered, self.stops, self.prefixes = engine, [], [], []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def translate(self, lines, search, *args, **kwargs):
        self.steered.append(kwargs.get("steer", False))
        self.stops.append(search.stop)
        self.prefixes.append(args[1] if len(args) > 1 else kwargs.get("prefixes"))
        return self.engine.translate(lines, search, *args, **kwargs)


def test_the_torch_search_is_steered_to_the_terms_by_term_bonus(
    overfit_engine, ct2_f32, overfit_pairs, monkeypatch
):
    """With term_bonus (the default), the torch engine's beam search of a line holding terms is
    steered to them, as given (soft constraints), in the one decoding: the model that writes
    Büsche and Schutzhelmen writes the glossary's terms with no term placed after; lines
    without terms are searched apart, as without a glossary. At 0, or on CTranslate2 (no
    constrained search), nothing is steered and the terms are placed in more decodings."""
    from nmt.inference import torch_engine

    glossary = Glossary.parse(TERMS, "g.tsv")
    lines, search = overfit_pairs[0][:3], overfit_engine.search
    assert search.term_bonus > 0
    plain = translate_texts(overfit_engine, lines, search)
    searched = []  # each steered batch's constraints and bonus

    class Spy(torch_engine.Steering):
        @classmethod
        def of(cls, constraints, ends_word, bonus, device):
            searched.append((constraints, bonus))
            return super().of(constraints, ends_word, bonus, device)

    monkeypatch.setattr(torch_engine, "Steering", Spy)
    steered = Calls(overfit_engine)
    found = translate_texts(steered, lines, replace(search, term_bonus=50.0), glossary=glossary)
    assert steered.steered == [True]  # one decoding: nothing placed
    helmen, straeucher = overfit_engine.tokenizer.target.encode(["Helmen", "Sträucher"])
    assert sorted(c for cs, _ in searched for c in cs) == sorted([[straeucher], [helmen]])
    assert {bonus for _, bonus in searched} == {50.0}
    assert "Sträucher" in [core(w) for w in found[0].text.split()], found[0].text
    assert "Helmen" in [core(w) for w in found[1].text.split()], found[1].text
    assert [t["used"] for t in found[0].terms + found[1].terms] == [True, True]
    assert found[2].text == plain[2].text and found[2].terms == []
    # stopping by first_k, the steered search is the plain one for a line without terms: it
    # shares the steered batch (one run of the decoder, not two), and translates the same
    first_k = replace(search, stop="first_k", term_bonus=50.0)
    searched.clear()
    found = translate_texts(overfit_engine, lines, first_k, glossary=glossary)
    assert len(searched) == 1 and [] in searched[0][0]
    assert found[2].text == translate_texts(overfit_engine, lines[2:], first_k)[0].text
    assert "Sträucher" in [core(w) for w in found[0].text.split()], found[0].text
    for engine, bonus in ((overfit_engine, 0.0), (ct2_f32, search.term_bonus)):
        searched.clear()
        calls = Calls(engine)
        decoding = replace(search, term_bonus=bonus, term_place="decode")
        placed = translate_texts(calls, lines, decoding, glossary=glossary)
        assert searched == [] and not any(calls.steered) and len(calls.steered) > 1
        assert [t["used"] for t in placed[0].terms + placed[1].terms] == [True, True]
        # placing's decodes, from a forced prefix, stop by first_k whatever the search's stop
        assert calls.stops == [search.stop] + ["first_k"] * (len(calls.stops) - 1)
    # a model that read its terms and was steered to them has none placed (a bonus too small
    # to move this model's beam leaves terms unwritten); one that reads none has them placed
    barely = replace(search, term_bonus=1e-3, term_place="decode")
    calls = Calls(TermReader(overfit_engine, "lemma"))
    found = translate_texts(calls, lines, barely, glossary=glossary)
    assert calls.steered == [True]  # read and steered: nothing placed
    assert not all(t["used"] for t in found[0].terms + found[1].terms)
    calls = Calls(overfit_engine)
    found = translate_texts(calls, lines, barely, glossary=glossary)
    assert calls.steered[0] and len(calls.steered) > 1  # read none: placed
    assert all(t["used"] for t in found[0].terms + found[1].terms)


def test_exact_terms_are_written_as_given_by_the_torch_search_and_refused_elsewhere(
    overfit_engine, ct2_f32, overfit_pairs, monkeypatch
):
    """glossary_exact: the search must write each term in the form given ("Helmen", not the
    model's "Schutzhelmen"), in one decoding; a line without a term shares the constrained
    batch (the constrained search is the plain one for it) and is as without a glossary;
    CTranslate2, which has no constrained search, refuses in one line."""
    from nmt.inference import torch_engine

    glossary = Glossary.parse(TERMS, "g.tsv")
    glossary.exact = True
    lines = overfit_pairs[0][:3]
    plain = translate_texts(overfit_engine, lines, overfit_engine.search)
    searched = []  # each constrained batch's constraints

    def spy(model, src, search, constraints, *rest):
        searched.append(constraints)
        return constrained_search(model, src, search, constraints, *rest)

    constrained_search = torch_engine.constrained_beam_search
    monkeypatch.setattr(torch_engine, "constrained_beam_search", spy)
    found = translate_texts(overfit_engine, lines, overfit_engine.search, glossary=glossary)
    assert len(searched) == 1 and sorted(len(c) for c in searched[0]) == [0, 1, 1]
    assert "Sträucher" in [core(w) for w in found[0].text.split()], found[0].text
    assert "Helmen" in [core(w) for w in found[1].text.split()], found[1].text
    assert [t["used"] for t in found[0].terms + found[1].terms] == [True, True]
    assert found[2].text == plain[2].text and found[2].terms == []
    with pytest.raises(SearchError, match="need the torch engine: the ctranslate2 engine"):
        translate_texts(ct2_f32, lines, ct2_f32.search, glossary=glossary)


def test_translate_and_evaluate_read_a_glossary_and_refuse_a_bad_one_in_one_line(
    model_pt, overfit_engine, overfit_pairs, tmp_path
):
    good, bad = tmp_path / "terms.tsv", tmp_path / "bad.tsv"
    good.write_text(TERMS, encoding="utf-8")
    bad.write_text("bushes Sträucher\n", encoding="utf-8")
    lines = overfit_pairs[0][:3]
    stdin = "".join(line + "\n" for line in lines).encode()
    result = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}", f"glossary={good}", "scores=true", "progress=false"],
        tmp_path,
        stdin=stdin,
    )
    assert result.returncode == 0, result.stderr.decode()
    rows = [row.split("\t") for row in result.stdout.decode().splitlines()]
    direct = translate_texts(
        overfit_engine, lines, overfit_engine.search, glossary=Glossary.read(str(good))
    )
    assert [row[0] for row in rows] == [t.text for t in direct]
    assert [row[6] for row in rows] == ["bushes -> Sträucher", "hard hats -> Helmen", ""]
    assert "glossary: 2 of 2 terms in 2 lines used" in result.stderr.decode()
    for module in ("nmt.translate", "nmt.evaluate"):
        refused = run_module(module, [f"ckpt={model_pt}", f"glossary={bad}"], tmp_path, stdin=b"")
        assert refused.returncode == 2, refused.stderr.decode()
        assert f"glossary={bad} line 1: 0 tabs" in refused.stderr.decode()
        assert len(refused.stderr.decode().strip().splitlines()) == 1
    args = [f"ckpt={model_pt}", f"glossary={good}", "glossary_exact=true", "backend=ctranslate2"]
    refused = run_module("nmt.translate", args, tmp_path, stdin=b"")
    assert refused.returncode == 2
    assert refused.stderr.decode().strip() == (
        "nmt.translate: error: exact glossary terms (glossary_exact) need the torch engine: "
        "the ctranslate2 engine has no constrained search (without glossary_exact the terms "
        "are used another way)"
    )


def test_the_lemma_cache_keeps_short_words_only():
    """A request's 2,000-character words are lemmatised but never kept: the cache holds
    words of up to MAX_CACHED_CHARS, so no client grows it past a few tens of MB."""
    from nmt.terms.glossary import MAX_CACHED_CHARS, cached_lemma, lemma

    long_word = "x" * 2000
    before = cached_lemma.cache_info().currsize
    assert lemma(long_word, "en") == long_word
    assert cached_lemma.cache_info().currsize == before
    short = f"Zorb{time.monotonic_ns()}"  # a word no other test has cached
    assert lemma(short, "en") == short.lower()
    assert cached_lemma.cache_info().currsize == before + 1
    assert len(short) <= MAX_CACHED_CHARS < len(long_word)
