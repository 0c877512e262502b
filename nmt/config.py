"""Typed configs: one dataclass per component and per command, extended by the YAML files
under `nmt/conf/`.

Every default lives here and nowhere else: an option file under `nmt/conf/` states only what
differs from these (a recipe's values, interpolations, the fields a dataclass leaves MISSING).
`register_configs` registers a command's dataclass with Hydra's ConfigStore as its schema,
so a misspelt key or a value of the wrong type fails at start-up with Hydra's own message. Code
reads fields, never `cfg.get(name, default)`. Hydra is imported only by `register_configs`:
the model, the tokenizer and the searches read these dataclasses without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID, SpecialIds

CONF_DIR = Path(__file__).resolve().parent / "conf"  # shipped inside the package

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"

STRATEGIES = ("greedy", "beam", "sample")
LENGTH_NORMS = ("gnmt", "power")
STOP_RULES = ("exact", "first_k")
TERM_PLACING = ("decode", "edit", "off")
CHOICES = {
    "strategy": STRATEGIES,
    "length_norm": LENGTH_NORMS,
    "stop": STOP_RULES,
    "term_place": TERM_PLACING,
}


@dataclass
class DecodeConfig:
    """Search settings shared by validation BLEU, translate, evaluate, serve and an export.

    A checkpoint carries the search chosen for it; commands use it unless the command line
    names `decode=...` or `decode.FIELD=...` (`nmt.inference.search_choice.choose_search`).
    """

    strategy: str = "greedy"  # greedy | beam | sample
    beam_size: int = 1
    len_penalty: float | None = None  # alpha of the length penalty (beam only)
    # gnmt: score = log P / ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, ours);
    # power: log P / |Y| ** alpha (CTranslate2's); |Y| counts EOS. docs/guide.md maps one to
    # the other.
    length_norm: str = "gnmt"
    # When a sentence's beam search ends (nmt.decoding.beam): exact = once no live hypothesis
    # can still beat its nbest best finished ones (the n best a search to the maximum length
    # returns, whatever the penalty);
    # first_k = once beam_size hypotheses have finished (fairseq's, HF's and CTranslate2's
    # rule), which also ends a search whose length penalty rewards length.
    stop: str = "exact"
    max_len_a: float = 1.0  # maximum output length = a * source_length + b (paper: |x| + 50)
    max_len_b: int = 50
    min_len: int = 0  # EOS is forbidden before this many tokens
    no_repeat_ngram_size: int = 0  # 0 = off
    nbest: int = 1  # hypotheses (beam) or samples (sample) returned per sentence
    # Sampling: the next token is drawn from softmax(log-probs / temperature) restricted to the
    # top_k most probable tokens (0 = all) and to the smallest set whose probability reaches
    # top_p (1.0 = all); temperature 0 is greedy. The same seed and the same batches give the
    # same samples.
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    # An ALL CAPS or Title Case line is translated in sentence case, an ALL CAPS line's
    # translation given back in capitals (nmt.translation.casing): a model that learnt from
    # sentence-case text loops on capitals. Texts with a forced prefix are translated as given.
    fold_case: bool = True
    # With a glossary (but glossary_exact), the hypotheses a beam search finished for a
    # sentence holding terms (up to beam_size) are ranked by how many of them each uses (by
    # lemma), then by score: the best one using the most comes first, before any term is
    # placed (nmt.translation.texts). Off: the search's own order.
    term_choice: bool = True
    # With a glossary (but glossary_exact), on an engine with a constrained search (torch),
    # the beam keeps hypotheses by their log-prob plus term_bonus for each token they have
    # written of their sentence's terms, as given (a term left unfinished counts nothing):
    # soft constraints (nmt.decoding.steering), which steer the search to the terms without
    # requiring them. 0: off. Scores and the n-best order stay the model's own. 5: the least
    # that used 95% of val's glossary terms at val BLEU as without it (docs/benchmarks.md).
    term_bonus: float = 5.0
    # With a glossary (but glossary_exact), a term a sentence's best translation still lacks
    # is placed where the alignment puts its source words (nmt.terms.placing): a model that
    # reads no terms uses them no other way, and one that reads them annotated is held to
    # them where its search was not steered to them (CTranslate2, or term_bonus 0). "edit":
    # written into the translation, no second search; "decode": the search continued from
    # the term (on CTranslate2 a second decode of the line, for a few tenths of BLEU:
    # docs/benchmarks.md); "off": a term not written is reported, not placed. A model stored
    # before "edit" (true/false) reads as "decode"/"off".
    term_place: str = "edit"

    def __post_init__(self) -> None:
        if isinstance(self.term_place, bool):  # as models stored it before "edit" (true/false)
            self.term_place = "decode" if self.term_place else "off"
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"decode.{name} must be one of {', '.join(allowed)}, "
                    f"not {getattr(self, name)!r}"
                )
        for name in ("beam_size", "nbest"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} must be at least 1, not {getattr(self, name)}")
        for name in ("max_len_a", "max_len_b", "min_len", "no_repeat_ngram_size", "top_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"decode.{name} must not be negative, not {getattr(self, name)}")
        if self.len_penalty is not None and self.len_penalty < 0:
            # the beam's stopping rule assumes the penalty grows with length
            raise ValueError(f"decode.len_penalty must not be negative, not {self.len_penalty}")
        if self.term_bonus < 0:
            raise ValueError(f"decode.term_bonus must not be negative, not {self.term_bonus}")
        if self.temperature < 0:
            raise ValueError(f"decode.temperature must not be negative, not {self.temperature}")
        if not 0 <= self.seed < 2**32:  # CTranslate2's seeds are 32-bit
            raise ValueError(f"decode.seed must be in [0, 2**32), not {self.seed}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"decode.top_p must be in (0, 1], not {self.top_p}")


# The names each setting takes, in one place: the rooms that act on them import these.
SEGMENTS = ("sentences", "lines")  # segment=: how texts are cut (nmt.translation.texts)
NORMS = ("post", "pre")  # model.norm
ACTIVATION_NAMES = ("relu", "gelu", "swish")  # model.activation (nmt.model.ACTIVATIONS)
# protect=: the kinds of span protected by default, all of nmt.terms.spans.KINDS
PROTECTED_KINDS = ("urls", "emails", "code", "variables", "numbers")


@dataclass
class ModelConfig:
    """Every hyperparameter of the network; the defaults are the paper's base model."""

    vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    token_dropout: float = 0.0  # word dropout: a whole input token's embedding zeroed (training)
    activation: str = "relu"  # of the FFN's hidden layer: "relu" (paper), "gelu" or "swish"
    norm: str = "post"  # "post" (paper) or "pre" (LayerNorm before each sublayer + final norm)
    tie_embeddings: bool = True  # source embedding = target embedding = output projection
    max_positions: int = 1024
    # A fixed bias added to the logits (V,): an imported Marian model's final_logits_bias,
    # kept as it came (a buffer, not trained), as transformers keeps it.
    output_bias: bool = False
    # The special ids (nmt.vocabulary): ours unless an imported model brings its own.
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID  # the decoder's first input
    eos_id: int = EOS_ID
    # Word alignments come from the cross-attention of this decoder layer (negative: from the
    # last, the first where that runs past it), averaged over its first alignment_heads heads
    # (0: all of them, raw attention, best in the second-to-last layer of an hour's model:
    # docs/benchmarks.md; guided alignment trains head 0 and sets 1).
    alignment_layer: int = -2
    alignment_heads: int = 0

    @property
    def alignment_layer_index(self) -> int:
        """The 0-based decoder layer of `alignment_layer` (counted back from the last, and
        the first where that runs past it: -2 of a one-layer decoder is its layer 0)."""
        if self.alignment_layer >= 0:
            return self.alignment_layer
        return max(self.decoder_layers + self.alignment_layer, 0)

    @property
    def special_ids(self) -> SpecialIds:
        return SpecialIds(self.pad_id, self.bos_id, self.eos_id)

    def __post_init__(self) -> None:
        for name in ("pad_id", "bos_id", "eos_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(
                    f"model.{name}={getattr(self, name)} is not an id of the "
                    f"{self.vocab_size}-piece vocabulary"
                )
        if self.eos_id in (self.pad_id, self.bos_id):
            raise ValueError(f"model.eos_id={self.eos_id} must differ from pad_id and bos_id")
        if not 0.0 <= self.token_dropout < 1.0:
            raise ValueError(f"model.token_dropout must be in [0, 1), got {self.token_dropout}")
        if self.norm not in NORMS:
            raise ValueError(f"model.norm must be one of {NORMS}, got {self.norm!r}")
        if self.activation not in ACTIVATION_NAMES:
            raise ValueError(
                f"model.activation must be one of {ACTIVATION_NAMES}, got {self.activation!r}"
            )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"model.d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        layer = self.alignment_layer
        if layer >= self.decoder_layers:
            raise ValueError(
                f"model.alignment_layer={layer} is not a layer of {self.decoder_layers}"
            )
        if not 0 <= self.alignment_heads <= self.n_heads:
            raise ValueError(
                f"model.alignment_heads must be in 0..{self.n_heads}, got {self.alignment_heads}"
            )


@dataclass
class BudgetBand:
    """The settings (dotted config fields -> values) of a run whose budget holds at most
    `max_updates` updates; None: any larger budget (nmt.training.budget_bands)."""

    max_updates: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class TokenizerConfig:
    """A joint sentencepiece model over source and target training text."""

    name: str = MISSING  # file stem: tokenizers/<name>.model, .vocab, .json
    dir: str = "tokenizers"
    vocab_size: int = 8000
    model_type: str = "bpe"
    character_coverage: float = 1.0
    input_sentence_size: int = 2_000_000  # sentences sampled from big corpora for training
    normalization_rule_name: str = "identity"  # raw text in, raw text out
    byte_fallback: bool = True  # any character survives the round trip
    seed: int = 1234  # sampling seed when the corpus is larger than input_sentence_size
    num_threads: int = 2


# in the order they apply; a new view goes last, so the draws of the others stay as they were
AUGMENT_VIEWS = ("merged", "numbers", "unpunctuated", "upper", "title", "placeholders", "terms")


@dataclass
class AugmentConfig:
    """The share of training pairs shown in each view per epoch, both sides changed alike
    (nmt.data.augmentation); 0 = never. Upper and title case exclude each other; the other
    views combine with them. `numbers` and `placeholders` need data.word_alignments (they write
    at linked words)."""

    upper: float = 0.0  # ALL CAPS
    title: float = 0.0  # Every Word Capitalised
    unpunctuated: float = 0.0  # the final . ! ? removed
    numbers: float = 0.0  # digits at a pair of linked words, replacing a number or put before
    merged: float = 0.0  # the pair and the next one as one pair
    # #1 (and #2) at pairs of linked words, replacing them or put before: what a protected
    # span becomes (nmt/terms/spans.py), so the model learns to carry it
    placeholders: float = 0.0
    # a source word or two annotated with their linked target word, as a glossary term is
    # at translation (nmt/terms/annotation.py), so the model learns to use the term given
    # (the recipe's updates with 0.2: 19% of terms used; with 0.4, term_mask 1.0 and terms
    # read in place, 57%, 64% with term_form exact, 71% with 0.8, 75% with twice the updates,
    # 83% with decode.term_choice, 97% with the torch beam steered to them (decode.term_bonus)
    # and on CTranslate2 with the rest placed (decode.term_place); each costs val BLEU
    # without a glossary at equal updates:
    # docs/experiments.md; the recipe leaves it off)
    terms: float = 0.0
    term_form: str = "lemma"  # what the annotation carries: the target's "lemma" or "exact" form
    # which linked words get annotated: "any", or "uncommon": where the pair has some, words
    # whose target is not their usual translation in the training pairs (what a glossary is for)
    term_pick: str = "any"
    # the share of annotated words left out, their annotation alone in their place, so that
    # the term is the model's one way to the word's translation
    term_mask: float = 0.0

    def __post_init__(self) -> None:
        if self.term_form not in ("lemma", "exact"):
            raise ValueError(f"data.augment.term_form={self.term_form}: choose lemma or exact")
        if self.term_pick not in ("any", "uncommon"):
            raise ValueError(f"data.augment.term_pick={self.term_pick}: choose any or uncommon")
        if not 0.0 <= self.term_mask <= 1.0:
            raise ValueError(f"data.augment.term_mask must be in [0, 1], got {self.term_mask}")
        for view in AUGMENT_VIEWS:
            if not 0.0 <= getattr(self, view) <= 1.0:
                raise ValueError(
                    f"data.augment.{view} must be in [0, 1], got {getattr(self, view)}"
                )

    @property
    def active(self) -> bool:
        return any(getattr(self, view) > 0 for view in AUGMENT_VIEWS)


@dataclass
class ReplayConfig:
    """General-domain pairs mixed into the training split of a fine-tuning run, against
    forgetting what the starting model knew (nmt.data.sources.with_replay): a fixed, seeded
    sample of `file` (.tsv or .tmx) sized so that it makes up `share` of the training pairs."""

    file: str | None = None
    share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.share < 1.0:
            raise ValueError(f"data.replay.share must be in [0, 1), got {self.share}")
        if self.share > 0 and not self.file:
            raise ValueError(
                "data.replay.share needs data.replay.file, the general pairs' file "
                "(data.replay.share=0: none)"
            )


# The German catalogs of a stock Debian machine's packages (nmt.corpus.catalogs), less the
# held-out ones below and iso-codes (names of countries and languages, not messages).
TRAINING_CATALOGS = [
    "postgresql-15", "git", "coreutils", "libgtk-3-common", "postgresql-client-15", "gnupg-l10n",
    "libgtk2.0-common", "krb5-locales", "dpkg", "libc-l10n", "libglib2.0-data", "bash",
    "gettext", "binutils-common", "libdpkg-perl", "gsettings-desktop-schemas", "wget",
    "xkb-data", "appstream", "system-config-printer-common", "login", "apt", "shared-mime-info",
    "make", "net-tools", "libgstreamer1.0-0", "libapt-pkg6.0", "libgnutls30", "libpq5",
    "xz-utils", "packagekit", "libhandy-1-0", "man-db", "adduser", "libgdk-pixbuf2.0-common",
    "systemd", "grep", "libelf1", "libavahi-common-data", "python-apt-common",
    "software-properties-common", "at-spi2-common", "libpam-runtime", "gettext-base",
    "libidn2-0", "polkitd", "cups-pk-helper", "libpopt0", "libsecret-common",
    "notification-daemon", "xdg-user-dirs",
]  # fmt: skip


@dataclass
class CorpusConfig:
    """A corpus built from named Debian packages and Multi30k (nmt.corpus.build): the domains
    trained on, each with its weight (repeats; a fraction: that share, sampled), and the
    packages each reads. Held-out catalogs are whole packages; kept ones are never trained on
    (their English is kept out of training too)."""

    domains: dict[str, float] = field(
        default_factory=lambda: {"multi30k": 1.0, "everyday": 1.0, "words": 0.05, "software": 1.0}
    )  # of multi30k, everyday (Ding's sentences), words (Ding's word pairs), software, docs
    dictionary: str = "trans-de-en"  # the Ding dictionary's package
    catalogs: list[str] = field(default_factory=lambda: list(TRAINING_CATALOGS))
    val_catalogs: list[str] = field(default_factory=lambda: ["procps", "psmisc", "sed"])
    test_catalogs: list[str] = field(default_factory=lambda: ["tar", "findutils", "diffutils"])
    kept_catalogs: list[str] = field(
        default_factory=lambda: ["nano", "gawk", "aptitude-common", "mc-data"]
    )
    held_out_share: float = 0.03  # of the dictionary's lines, each for val and for test
    # docs: the documentation sets read (nmt.corpus.documentation.DOC_SETS), and the share of
    # their pages each held out for val and for test (whole pages, by their names' hash)
    documentation: list[str] = field(
        default_factory=lambda: ["debian-reference", "installation-guide"]
    )
    page_share: float = 0.1
    eval_pairs: int = 500  # the most pairs of a domain's val or test split (a seeded sample)
    max_words: int = 80  # pairs with more words on either side are dropped
    max_ratio: float = 3.0  # and pairs whose word counts differ more
    seed: int = 0  # the samples' seed
    cache_dir: str | None = None  # packages and built corpora; None: ~/.cache/nmt


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it is cleaned and batched.

    source: "multi30k" (local dir or the canonical URLs), "hub" (a `datasets` dataset with a
    `translation` column: a hub id such as wmt/wmt14, or json/parquet with data_files), or
    "files" (a pair of parallel text files per split in data_files), or "debian" (a corpus
    built from named Debian packages and Multi30k: `corpus`).
    """

    source: str = MISSING
    name: str = MISSING  # short name used in cache keys and reports
    src_lang: str = "en"
    tgt_lang: str = "de"
    dir: str | None = None  # multi30k: local folder of {split}.{lang}; else NMT_DATA_DIR, else url
    url: str = MULTI30K_URL  # multi30k: base URL of {split}.{lang}.gz
    path: str | None = None  # hub: dataset id or builder name (json, parquet)
    config_name: str | None = None  # hub: dataset config, e.g. de-en
    # hub (json/parquet): {source split: file or files}; files: {source split: {lang: file}};
    # empty = none (a hub id needs none)
    data_files: dict[str, Any] = field(default_factory=dict)
    splits: dict[str, str] = field(
        default_factory=lambda: {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    )  # role (train, valid, test) -> the source's split name
    max_len: int = 250  # training pairs with more tokens on either side are dropped
    max_len_ratio: float = 3.0  # training pairs with a longer/shorter token ratio above are dropped
    max_tokens: int = 4096  # padded source or target tokens per training batch
    # BPE-dropout: each merge is skipped with this probability when a training pair is read,
    # a new segmentation each epoch; 0 = the tokenizer's own. Batches are sized by the
    # tokenizer's own segmentation, so sampled ones hold more tokens (docs/guide.md). Validation
    # and test text is never sampled.
    bpe_dropout: float = 0.0
    # Bidirectional training (BiT, Ding et al. 2021): the first N epochs read every training pair
    # twice, once as it is and once with source and target swapped (an epoch of twice the
    # batches), then the task's direction alone; the joint vocabulary serves both. 0 = off.
    bidirectional_epochs: int = 0
    eval_max_tokens: int = 8192  # the same for validation/test batches
    cache_dir: str | None = None  # datasets cache; None = the datasets default (HF_DATASETS_CACHE)
    num_proc: int = 1  # processes for tokenization (Dataset.map)
    num_workers: int = 0  # DataLoader workers
    max_train_pairs: int | None = None  # keep only the first N training pairs (tests, smoke runs)
    max_eval_pairs: int | None = None  # and the first N validation and test pairs (a quick look)
    # files: training pairs set aside as the validation split when data_files names none
    carve_valid: int = 1000
    # Also dropped from the training pairs (and counted): repeats of an earlier pair, and
    # pairs whose target is their source (untranslated); on for data=files.
    drop_duplicates: bool = False
    drop_copies: bool = False
    # Word-align the training pairs with eflomal (both directions, grow-diag-final-and), once,
    # cached with the encoded data: for guided alignment (optim.alignment_weight). Needs
    # `pip install eflomal`; not with bpe_dropout or bidirectional_epochs.
    word_alignments: bool = False
    # Views of the training pairs drawn anew each epoch (ALL CAPS, Title Case, no final
    # punctuation, numbers, merged pairs, placeholders), cached per epoch under the data's
    # fingerprint.
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)  # source: debian

    def __post_init__(self) -> None:
        for view in ("numbers", "placeholders", "terms"):
            if getattr(self.augment, view) > 0 and not self.word_alignments:
                raise ValueError(
                    f"data.augment.{view} writes at linked words: set data.word_alignments=true"
                )
        if not 0.0 <= self.bpe_dropout < 1.0:
            raise ValueError(f"data.bpe_dropout must be in [0, 1), got {self.bpe_dropout}")
        if self.bidirectional_epochs < 0:
            raise ValueError(
                f"data.bidirectional_epochs must be >= 0, got {self.bidirectional_epochs}"
            )
        longest = self.max_len + 1  # a kept training sentence, with its BOS or EOS
        for name in ("max_tokens", "eval_max_tokens"):
            if getattr(self, name) < longest:
                raise ValueError(
                    f"data.{name}={getattr(self, name)} is smaller than one training sentence "
                    f"(data.max_len={self.max_len} pieces + 1): raise it or lower data.max_len"
                )


@dataclass
class OptimConfig:
    """Adam with a warmup schedule.

    inverse_sqrt (the paper): lr(step) = lr_scale * d_model^-0.5 * min(step^-0.5,
    step * warmup_steps^-1.5). cosine: the same warmup to the same peak, then a half cosine
    down to zero at total_steps; null ends it where the run's budget ends (trainer.max_steps
    or max_epochs, or the update count max_time will reach, re-estimated as the run goes:
    nmt.training.budget).
    """

    schedule: str = "inverse_sqrt"  # inverse_sqrt | cosine
    lr_scale: float = 1.0
    # The peak lr itself, whatever the model's width: lr_scale is then ignored. For a run whose
    # d_model comes from its init_from (an imported model is 512 wide, ours 128 or 512).
    peak_lr: float | None = None
    warmup_steps: int = 4000
    # The warmup follows the run's budget: min(warmup_steps, warmup_fraction x the updates the
    # budget allows, as nmt.training.budget estimates them), with the peak lr of warmup_steps
    # kept, so a slow machine's run, which reaches fewer updates in its max_time, still warms
    # up and decays in the same proportions. null = always warmup_steps.
    warmup_fraction: float | None = None
    total_steps: int | None = None  # cosine only: lr reaches zero there; null: the budget's end
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    # R-Drop (Liang et al. 2021): each training batch runs twice under different dropout, and
    # the loss per token is the passes' mean cross-entropy plus rdrop_alpha / 2 times their
    # mean (KL(a||b) + KL(b||a)) / 2: the paper's loss, halved, with its alpha (5 for IWSLT).
    # A step costs ~twice the compute for the same data.max_tokens. 0 = off, one pass.
    rdrop_alpha: float = 0.0
    # Guided alignment (Garg et al. 2019): this times the cross-entropy of the alignment head
    # (model.alignment_layer, its first model.alignment_heads heads) against the training
    # pairs' word alignment (data.word_alignments), added to the loss per target token. 0 =
    # off. fairseq's alignment_lambda is 0.05.
    alignment_weight: float = 0.0

    @property
    def ends_at_budget(self) -> bool:
        """A cosine whose end nmt.training.budget fits to the run's budget (total_steps null)."""
        return self.schedule == "cosine" and self.total_steps is None

    @property
    def follows_budget(self) -> bool:
        """Whether the schedule needs the run's update count (its end, or its warmup)."""
        return self.ends_at_budget or self.warmup_fraction is not None

    def __post_init__(self) -> None:
        if self.warmup_fraction is not None and not 0.0 < self.warmup_fraction < 1.0:
            raise ValueError(
                f"optim.warmup_fraction must be in (0, 1) or null, got {self.warmup_fraction}"
            )
        if self.rdrop_alpha < 0:
            raise ValueError(f"optim.rdrop_alpha must be >= 0, got {self.rdrop_alpha}")
        if self.schedule not in ("inverse_sqrt", "cosine"):
            raise ValueError(
                f"optim.schedule must be inverse_sqrt or cosine, not {self.schedule!r}"
            )
        if self.schedule == "cosine" and self.total_steps is not None:
            if self.total_steps <= self.warmup_steps:
                raise ValueError(
                    f"optim.schedule=cosine needs optim.total_steps above warmup_steps="
                    f"{self.warmup_steps} (or null: the budget's end), got {self.total_steps}"
                )


@dataclass
class TrainerConfig:
    """Arguments handed to `lightning.Trainer` unchanged."""

    accelerator: str = "auto"
    devices: Any = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"  # 32-true, bf16-mixed, 16-mixed
    max_steps: int = -1
    max_epochs: int | None = None
    max_time: str | None = None  # "DD:HH:MM:SS": stop after this much wall time (a budget)
    gradient_clip_val: float | None = None
    accumulate_grad_batches: int = 1
    val_check_interval: Any = 1.0  # int = every N training batches, float = fraction of an epoch
    check_val_every_n_epoch: int | None = 1
    log_every_n_steps: int = 50
    limit_val_batches: Any = 1.0
    num_sanity_val_steps: int = 0
    deterministic: bool = False
    enable_progress_bar: bool = True


@dataclass
class CheckpointConfig:
    """Which checkpoints training keeps and when it stops early."""

    monitor: str = "val/bleu"
    mode: str = "max"
    save_top_k: int = 3
    save_last: bool = True
    every_n_train_steps: int | None = None  # also save every N steps (for averaging the last N)
    early_stopping_patience: int | None = None  # validations without improvement; None = off
    # Windows N to try: keep the checkpoints of the last max(N) epochs (checkpoints/epochs/)
    # and, after training, average the last N for each N; model.pt is whichever of these
    # averages and the best checkpoint scores the highest validation BLEU. Where a wall-clock
    # budget ends decides the best window, so a time-limited recipe lists several. [] = off.
    average_last_epochs: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if any(n < 1 for n in self.average_last_epochs):
            raise ValueError(
                "checkpoint.average_last_epochs lists epoch counts of at least 1, "
                f"got {self.average_last_epochs}"
            )


@dataclass
class FinalEvaluationConfig:
    """After training, score model.pt on these split roles with its search (TrainConfig.search)
    and write `nmt.evaluate`'s folder to <run>/evaluation/, so one command reproduces a results
    row. No splits = none. Searches are chosen on validation, never on test."""

    splits: list[str] = field(default_factory=list)  # roles of data.splits, e.g. [valid, test]
    max_tokens: int = 4096  # padded source tokens x beam rows per batch


@dataclass
class TrainConfig:
    data: DataConfig = MISSING
    tokenizer: TokenizerConfig = MISSING
    model: ModelConfig = MISSING
    optim: OptimConfig = MISSING
    trainer: TrainerConfig = MISSING
    decode: DecodeConfig = MISSING  # the search of validation BLEU during training
    # The search model.pt carries: translate, evaluate, serve and the final evaluation run it.
    search: DecodeConfig = field(default_factory=DecodeConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    final_evaluation: FinalEvaluationConfig = field(default_factory=FinalEvaluationConfig)
    experiment_name: str = MISSING
    seed: int = 1234
    ckpt_path: str | None = None  # resume: "last" (of this run's folder) or a checkpoint path
    # fine-tune: start from this model.pt's weights, shape and tokenizer with a fresh optimizer
    # and schedule (nmt/training/init_from.py)
    init_from: str | None = None
    val_bleu: bool = True  # decode the validation split and log val/bleu at each validation
    compile: bool = False  # torch.compile each encoder and decoder layer
    # Compiled oneDNN kernels kept (CPU, bf16): enough for every batch shape of an epoch;
    # null leaves oneDNN's default (1024). See nmt.cpu.
    onednn_kernel_cache: int | None = 16384
    # Settings by the updates the budget will hold (nmt/training/budget_bands.py); [] = none
    budget_bands: list[BudgetBand] = field(default_factory=list)
    # A NaN or infinite training loss: "stop" ends the run with an error naming the step;
    # "skip" drops that batch with a warning (single process only: DDP ranks would diverge).
    on_nonfinite_loss: str = "stop"

    def __post_init__(self) -> None:
        if self.on_nonfinite_loss not in ("stop", "skip"):
            raise ValueError(
                f"on_nonfinite_loss must be stop or skip, not {self.on_nonfinite_loss!r}"
            )
        roles = self.data.splits
        missing = [role for role in ("train", "valid") if role not in roles]
        if missing:  # found at the start, not at the first validation
            raise ValueError(f"data.splits has no {' or '.join(missing)} role (roles: {roles})")
        unknown = [role for role in self.final_evaluation.splits if role not in roles]
        if unknown:  # found at the start, not after the hours of training
            raise ValueError(
                f"final_evaluation.splits={unknown} not in data.splits (roles: {', '.join(roles)})"
            )
        fitted = self.optim.ends_at_budget
        budgets = (self.trainer.max_steps > 0, self.trainer.max_epochs, self.trainer.max_time)
        if fitted and not any(budgets):
            raise ValueError(
                "optim.schedule=cosine with optim.total_steps=null ends at the run's budget: "
                "set trainer.max_steps, max_epochs or max_time (or optim.total_steps)"
            )
        by_epochs = self.trainer.max_steps <= 0 and not self.trainer.max_time
        if self.data.bidirectional_epochs and by_epochs and (fitted or self.budget_bands):
            raise ValueError(  # Lightning counts every epoch's updates as the first's, doubled
                "data.bidirectional_epochs doubles its epochs' updates, which a budget of "
                "trainer.max_epochs cannot count ahead: set trainer.max_steps or max_time"
            )
        if self.optim.warmup_fraction is not None and not any(budgets):
            raise ValueError(
                "optim.warmup_fraction fits the warmup to the run's budget: set "
                "trainer.max_steps, max_epochs or max_time (or optim.warmup_fraction=null)"
            )
        if fitted and 0 < self.trainer.max_steps <= self.optim.warmup_steps:
            raise ValueError(
                f"optim.schedule=cosine: trainer.max_steps={self.trainer.max_steps} ends "
                f"within optim.warmup_steps={self.optim.warmup_steps}, before any decay"
            )
        if not self.val_bleu and self.checkpoint.monitor in ("val/bleu", "val/chrf"):
            raise ValueError(
                f"val_bleu=false logs no {self.checkpoint.monitor}: set checkpoint.monitor "
                "to val/loss (mode=min) or another logged metric"
            )


@dataclass
class InferenceConfig:
    """What the commands that translate share: the model, its engine, the search, the batch."""

    ckpt: str = MISSING
    ensemble: list[str] = field(default_factory=list)  # more checkpoints searched with ckpt
    decode: DecodeConfig = MISSING
    # padded source tokens x beam rows per batch; None: the engine's own (default_max_tokens)
    max_tokens: int | None = None
    backend: str = "torch"  # torch (a .pt/.ckpt) | ctranslate2 (a dir from nmt.export)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "float32"  # torch: float32 | bfloat16 | float16 | auto (bf16 where native)
    compute_type: str = "default"  # ctranslate2: default (as exported) | int8 | float32 | ...
    threads: int = 0  # CPU threads; 0 = torch's default (the cores)


@dataclass
class ArchiveLimits:
    """A zip-based file's (a Word file's) limits, checked before it is unzipped."""

    # A Word file is refused before it is unzipped when its parts would inflate past this many
    # bytes, or any part over 1 MB by more than this ratio (a zip bomb: nmt/jobs/check.py)
    max_inflated_bytes: int = 100_000_000
    max_zip_ratio: float = 100.0


@dataclass
class RequestLimits(ArchiveLimits):
    """How much one request may ask of the server: the one table of limits. ServeConfig holds
    these fields, the checks read them (nmt.jobs.job.Limits), /info lists them, and each is
    answered with a 413 naming it."""

    max_body_bytes: int = 1_000_000  # a request body, as read (a file route: max_file_bytes)
    max_lines: int = 256  # lines in one request
    max_line_chars: int = 2000  # characters in one line (or one prefix)
    # POST /translate_file (nmt/serving/files.py): the largest file, and the most segments
    # (lines of a text file, text runs between an HTML or Word file's blocks) it may hold
    max_file_bytes: int = 2_000_000
    max_file_segments: int = 5000
    # An HTML or Word segment's words and inline tags (or runs), counted before alignment and
    # tag projection; a search's worst case: segments x beams x n-best x the longest output
    # it allows, in tokens (nmt/jobs/check.py). Each answered with a 413 naming it.
    max_segment_words: int = 400
    max_segment_tags: int = 200
    # An HTML text's or file's tags (its "<"s) or a Word file's runs, counted before parsing
    max_file_tags: int = 50_000
    max_search_cost: int = 20_000_000
    # The decoder state one batch may hold (the self-attention keys and values of every row
    # at its longest output): the planner cuts batches to it, and a single sentence's search
    # that would pass it on its own is refused (nmt/inference/planner.py, nmt/jobs/check.py)
    max_decoder_bytes: int = 1 << 30
    # Seconds a request's own protect_patterns may take on all its texts together, tried before
    # any translation (they run on RE2, in linear time: nmt/terms/spans.py); over it, a 422
    max_pattern_seconds: float = 0.5


@dataclass
class SegmentConfig:
    """How `translate`, the server and `evaluate` read text before translating it: cut into
    segments (nmt.documents), spans protected (nmt.terms.spans). Evaluate scores what
    translate would print for the same lines."""

    # sentences: each line (each request text) is cut into sentences, translated in the same
    # batches as all others and joined back around the text's own whitespace and Markdown
    # markers (nmt/translation/layout.py); lines: each line is one segment, as the model sees it
    segment: str = "sentences"
    # A "sentence" of more words than this (a run of captions without final punctuation) is
    # cut again before each likely sentence start (nmt/translation/sentences.py)
    segment_max_words: int = 25
    # Spans every translation carries byte for byte, through placeholders and the word
    # alignment (nmt/terms/spans.py): the kinds (urls, emails, code, variables, numbers) and
    # regular expressions of your own; protect=[] protect_patterns=[] for none
    protect: list[str] = field(default_factory=lambda: list(PROTECTED_KINDS))
    protect_patterns: list[str] = field(default_factory=list)
    # How a protected number comes back: keep (byte for byte, as written) or localize (an
    # amount with German separators: 3.5 kg -> 3,5 kg, 1,000 -> 1.000; nmt/written_numbers.py)
    numbers: str = "keep"
    # A glossary: a TSV file of "source term<TAB>target term" lines (nmt/terms/glossary.py).
    # A model trained with data.augment.terms reads each term annotated in the source
    # (nmt/terms/annotation.py); for any other, a sentence whose translation lacks a term is
    # decoded again from it (nmt/terms/placing.py).
    glossary: str | None = None
    # Each term in the exact form given, a hard constraint of the beam search (torch engine;
    # nmt/decoding/constrained.py), beside the annotation where the model learnt it
    glossary_exact: bool = False


@dataclass
class DocumentConfig(SegmentConfig, ArchiveLimits):
    """What `translate` and the server read besides lines: HTML and Word documents."""

    # text: plain text, Markdown included; html: translate's whole input is one HTML document
    # (a server request's each text is one), its tags kept (nmt/documents/markup.py); docx
    # (translate): a Word file, its runs' formatting kept (nmt/documents/docx_file.py); auto:
    # translate takes html for an input= ending .html/.htm, docx for .docx, else text, and the
    # server text
    format: str = "auto"
    # A gettext (.po) or XLIFF file's messages that already have a translation are kept;
    # true translates them again (fuzzy and obsolete messages are left alone either way).
    # The server's default, which a file request's `retranslate` field overrides
    retranslate: bool = False


@dataclass
class TranslateConfig(DocumentConfig, InferenceConfig):
    """`python -m nmt.translate`: raw text in, one line out per line in."""

    input: str | None = None  # default: stdin
    output: str | None = None  # default: stdout
    # >1 writes "hyp<TAB>score" pairs on each line (n best of decode=beam, or n samples)
    nbest: int = 1
    # A file aligned with the input: line i's text starts every translation of input line i
    # (the search continues it); an empty line forces nothing.
    prefix_file: str | None = None
    chunk_lines: int = 10000  # lines read, translated and written at a time
    max_file_bytes: int = 20_000_000  # format=html/docx: the largest input read whole
    progress: str = "auto"  # auto (a bar on stderr for file input) | true | false
    # Each line also gets the translation's scores, tab-separated (nmt.inference.scores):
    # "translation<TAB>log-prob per token<TAB>log-prob<TAB>word log-probs<TAB>confidence
    # <TAB>warnings" (the output checks': a missing number, URL or address, a loop, a fix;
    # a span put back; a term not used), and with a glossary "<TAB>the terms it uses"
    scores: bool = False
    # Each translation is followed by a tab and its word alignment in Pharaoh format, "0-0 1-2"
    # (source word - target word, whitespace words; nmt.inference.alignment); after the scores
    alignments: bool = False


@dataclass
class ScoreConfig(InferenceConfig):
    """`python -m nmt.score`: force-decode given translations, print how the model rates them."""

    src: str = MISSING  # source lines
    tgt: str = MISSING  # their translations, line by line
    output: str | None = None  # default: stdout
    chunk_lines: int = 10000
    progress: str = "auto"


@dataclass
class CalibrateConfig(InferenceConfig):
    """`python -m nmt.calibrate`: fit the model's confidence on held-out pairs (val), store it."""

    src: str = MISSING  # source lines, e.g. val.en
    ref: str = MISSING  # their references, e.g. val.de


@dataclass
class AerConfig:
    """`python -m nmt.aer`: word alignments against a gold standard."""

    gold: str = MISSING  # Pharaoh lines, sure "i-j" and possible "i?j" links
    hyp: str = MISSING  # Pharaoh lines to score


@dataclass
class EvaluateConfig(SegmentConfig, InferenceConfig):
    """`python -m nmt.evaluate`: one checkpoint, some split roles of a dataset, one search."""

    data: DataConfig = MISSING
    splits: list[str] = field(default_factory=lambda: ["test"])  # roles of data.splits
    # Store the search this run used in the checkpoint (model.pt, or an exported dir's
    # nmt.json), so translate and evaluate use it from then on: e.g. the best of a sweep on val.
    save_search: bool = False
    length_buckets: list[int] = field(default_factory=lambda: [10, 20, 30])  # upper edges, words
    examples: int = 5  # best and worst sentences (by sentence BLEU) listed in report.md
    attention: list[int] = field(default_factory=list)  # line indices of the first split to plot
    progress: str = "auto"  # auto (a bar on stderr when it is a terminal) | true | false


@dataclass
class ServeConfig(DocumentConfig, InferenceConfig, RequestLimits):
    """`python -m nmt.serve`: the model over HTTP (nmt.serving). The search is the model's
    own (or the command line's, as for translate); each request may change its fields."""

    host: str = "127.0.0.1"  # 0.0.0.0 to listen on every interface
    port: int = 8000
    # Cross-request batching: a free model worker takes up to batch_requests waiting requests,
    # waiting for more until batch_wait_ms after the first arrived (nmt/serving/batching.py),
    # and decodes their lines together, length-sorted under max_tokens. batch_requests=1 is
    # off: one request at a time per worker.
    batch_requests: int = 8
    batch_wait_ms: float = 20.0
    # Model workers (processes, each with its own copy of the model): 0 = one per core on the
    # CPU, each on one thread (threads=0), one on a GPU. Small batches decode faster on a core
    # each than on all cores together (docs/benchmarks.md).
    workers: int = 0
    # How the torch backend's model workers start (and restart after one dies): auto =
    # forked from the server on the CPU (torch and our modules already imported: a worker is
    # up in a fraction of the time), spawned (a fresh interpreter) on a GPU, where CUDA does
    # not survive a fork; or fork, or spawn
    worker_start: str = "auto"
    timeout: float = 30.0  # seconds a request may wait for the worker before a 504
    # On SIGTERM or SIGINT, the requests in flight get this long to finish before every
    # process stops (nmt/serve.py)
    drain_seconds: float = 30.0
    # Connections (uvicorn's, and the door's): a connection that has not sent a request's
    # headers within header_seconds of opening (or of its last answer) is answered 408 and
    # closed (nmt/serving/connections.py); a request whose body takes longer than body_seconds
    # to arrive is answered 408 (a client sending a byte a second holds nothing for long); the
    # bodies being read or answered hold at most max_bodies_bytes together, past which a 503;
    # one client address holds at most max_client_connections, past which a 429; past
    # max_connections at once, uvicorn answers 503; an idle kept-alive connection is closed
    # after keep_alive_seconds. X-Forwarded-For is read only from the addresses in
    # trusted_proxies (e.g. [127.0.0.1] behind a proxy on this machine), which the per-client
    # cap does not count; by default no client can name its own address (and so get a fresh
    # rate-limit window).
    header_seconds: float = 10.0
    body_seconds: float = 30.0
    max_bodies_bytes: int = 256 << 20
    max_client_connections: int = 64
    max_connections: int = 1000
    keep_alive_seconds: float = 5.0
    trusted_proxies: list[str] = field(default_factory=list)
    # sentence translations kept per model worker (LRU; nmt/inference/cache.py), keyed by the
    # sentence and the whole search; 0: none
    cache_sentences: int = 10000
    cache_bytes: int = 64_000_000  # and at most about this much memory (each worker's)
    # Off unless set (nmt/serving/access.py): a file of API keys, one per line (then every
    # translating route asks for one); request and character limits per key, or per client
    # address without one, as "60/minute" or "100000/hour"; origins a browser page may call
    # the API from (CORS), e.g. [https://example.org]
    api_keys_file: str | None = None
    limit_requests: str | None = None
    limit_chars: str | None = None
    # refused requests per client address (bad keys, bodies, limits passed): past it a 429
    # before the body is read; None: as limit_requests
    limit_refused: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    # Where those limits are counted: memory:// (this process alone), or redis://host:port/db
    # (rediss:// with TLS), one count for every replica that names the same store
    # (nmt/serving/limit_storage.py; checked at start-up)
    limits_storage: str = "memory://"
    # GET /metrics for Prometheus (nmt/serving/metrics.py), behind this bearer token if set
    metrics: bool = False
    metrics_token: str | None = None
    log_level: str = "warning"  # uvicorn's: info logs every request


@dataclass
class ExportConfig:
    """`python -m nmt.export`: a checkpoint as a CTranslate2 or Hugging Face model directory."""

    ckpt: str = MISSING
    format: str = "ctranslate2"  # ctranslate2 | hf (a MarianMTModel directory)
    # ctranslate2: int8 (unset) | int8_float32 | int16 | float32 | float16 | bfloat16 ...;
    # hf: the saved weights' dtype, float32 (unset) | float16 | bfloat16
    quantization: str | None = None
    # hf: the evaluation.json whose scores the model card reports (None: the one
    # nmt.train writes beside the checkpoint, <ckpt folder>/evaluation/, if it is there)
    evaluation: str | None = None
    out: str = MISSING  # a new directory (overwrite=true replaces an earlier export there)
    overwrite: bool = False
    progress: str = "auto"  # auto (a bar on stderr when it is a terminal) | true | false


@dataclass
class ImportConfig:
    """`python -m nmt.import`: a Hugging Face MarianMTModel (OPUS-MT's, or our format=hf
    export) as our model.pt."""

    source: str = MISSING  # a MarianMTModel directory, or a hub id where the network allows
    out: str = MISSING  # the model.pt to write (overwrite=true replaces an existing file)
    src_lang: str | None = None  # None: the tokenizer's source_lang, else en
    tgt_lang: str | None = None  # None: the tokenizer's target_lang, else de
    overwrite: bool = False


@dataclass
class AverageConfig:
    """`python -m nmt.average`: the mean weights of some checkpoints."""

    dir: str | None = None  # a folder of .ckpt/.pt checkpoints
    checkpoints: list[str] = field(default_factory=list)  # or an explicit list
    last: int = 5
    output: str | None = None  # default: <dir>/averaged_last<N>.pt


# The schema each command's YAML extends: nmt/conf/<command>.yaml's defaults name
# `<command>_schema`
SCHEMAS = {
    "train": TrainConfig,
    "translate": TranslateConfig,
    "score": ScoreConfig,
    "calibrate": CalibrateConfig,
    "aer": AerConfig,
    "evaluate": EvaluateConfig,
    "average": AverageConfig,
    "export": ExportConfig,
    "import": ImportConfig,
    "serve": ServeConfig,
}


@cache
def register_configs(command: str) -> None:
    """Register the schema nmt/conf/<command>.yaml extends, and the resolver the YAML files
    use: once a process and command. That schema alone: Hydra deep-copies every stored schema
    at each compose, and building all ten cost a command's start ~70 ms."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from nmt.cpu import precision_for_this_cpu

    OmegaConf.register_new_resolver("cpu_precision", precision_for_this_cpu, replace=True)
    ConfigStore.instance().store(name=f"{command}_schema", node=SCHEMAS[command])
