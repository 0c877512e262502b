"""Shared fixtures. Keep each group under its own heading."""

from __future__ import annotations

import functools
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings as hypothesis_settings
from zygote import stand_in_of

from nmt.config import CONF_DIR, TokenizerConfig
from nmt.vocabulary import PAD_ID

if TYPE_CHECKING:  # torch and what imports it load in the test processes, not xdist's main one
    import torch

    from nmt.tokenizer import Tokenizer

# Property tests draw the same examples on every run, so that a CI verdict is the code's, not
# the draw's (two runs of one commit once drew two different failures). To draw new ones:
# HYPOTHESIS_PROFILE=explore make test; a case found so is kept as an @example.
hypothesis_settings.register_profile("ci", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["data_skips", "pytester"]  # data_skips: a run short of Multi30k says so

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Test processes share the cores (make test: three on CI's two): a thread each, for this
    # process and the commands it starts, since threads that spin for a busy core slow down
    # many-fold.
    import torch

    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"

# Modules whose tests train or start processes for tens of seconds each: handed out early,
# so that no worker ends the run alone on one of them while the other idles.
HEAVY_MODULES = (
    "test_training.py",
    "test_reliability.py",
    "test_alignment.py",
    "test_init_from.py",
    "test_sweeps.py",
    "test_budget_bands.py",
    "test_loss_normalisation.py",
    "test_corpus.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order xdist hands work out in (conftest's `pytest_configure` keeps it): first the
    largest group that needs the shared overfit model, whose worker trains it (~15 s); then
    the tests that need no model, heaviest first, for the other worker meanwhile, so neither
    waits; then the other groups that need it, largest first, so that none is left for the
    run's end; then the rest, heavy modules first."""
    scopes: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        scopes.setdefault(group.args[0] if group else item.nodeid, []).append(item)

    def needs_model(scope: list[pytest.Item]) -> bool:
        return any("overfit_run" in item.fixturenames for item in scope)

    def heavy(scope: list[pytest.Item]) -> bool:
        return any(item.path.name in HEAVY_MODULES for item in scope)

    largest = max((s for s in scopes.values() if needs_model(s)), key=len, default=None)

    def rank(scope: list[pytest.Item]) -> tuple:
        return (scope is not largest, needs_model(scope), not heavy(scope), -len(scope))

    items[:] = [item for scope in sorted(scopes.values(), key=rank) for item in scope]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, Lightning, transformers: ~500k objects) is frozen out of
    the garbage collector: each full collection would walk it again (~0.3 s each, 14 CPU-s
    over a run of the suite)."""
    gc.collect()
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    """xdist's controller hands work out in our order (above), not by scope size; the run's
    main process starts the zygote its test processes share (`zygote`)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if ZYGOTE_ENV not in os.environ:
        _STARTED.append(start_zygote(preload_now=bool(config.getoption("numprocesses", None))))
        # xdist's test processes fork from it too (tests/zygote.py's stand-in), with torch,
        # Lightning and the formats' libraries imported already
        stand_in = zygote().stand_in
        tx = config.getoption("tx", None) or []
        config.option.tx = [f"popen//python={stand_in}" if x == "popen" else x for x in tx]


# --- helpers: tensors, threads, configs and command lines ---


def pad(rows: list[list[int]]) -> torch.Tensor:
    """Id lists -> (B, L) long, right-padded with PAD."""
    import torch

    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread: these tensors are too small to gain from more, and spinning
    threads slow down many-fold when the cores are shared (another test run, a build)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def compose(config_name: str, overrides: list[str]):
    """A real config under nmt/conf (train, translate, evaluate) with overrides, typed."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from nmt.config import register_configs

    register_configs(config_name)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return OmegaConf.to_object(hydra_compose(config_name, overrides=overrides))


def run_module(
    module: str,
    args: list[str],
    cwd: Path,
    stdin: bytes = b"",
    timeout: float = 300,
    env: dict[str, str] | None = None,
    text: bool = False,
) -> subprocess.CompletedProcess:
    """`python -m module args...` in `cwd` on one thread, this checkout first on the path, `env`
    over this process's environment; stdout and stderr as bytes (as str with `text`). It runs
    as its own process, forked from the run's zygote (tests/zygote.py), which has torch and
    Lightning imported already."""
    with ExitStack() as files:
        streams = [files.enter_context(tempfile.TemporaryFile()) for _ in range(3)]
        streams[0].write(stdin)
        streams[0].seek(0)
        with started_module(module, args, cwd, streams, env) as command:
            try:
                returncode = command.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(command.pid, signal.SIGKILL)
                cmd = [sys.executable, "-m", module, *args]
                raise subprocess.TimeoutExpired(cmd, timeout) from None
        stdout, stderr = (_read(stream) for stream in streams[1:])
    if text:
        stdout, stderr = stdout.decode(), stderr.decode()
    return subprocess.CompletedProcess(
        [sys.executable, "-m", module, *args], returncode, stdout, stderr
    )


@contextmanager
def started_module(
    module: str, args: list[str], cwd: Path, streams=None, env: dict[str, str] | None = None
) -> Iterator[Command]:
    """`python -m module args` forked from the zygote, as run_module's, and not waited for:
    yields its Command (`pid`, `wait` and `poll` for its returncode). `streams`: its stdin, stdout
    and stderr (open files), else /dev/null for all three."""
    env = {**os.environ, **(env or {}), **COMMAND_ENV}
    with ExitStack() as files:
        if streams is None:
            streams = [files.enter_context(open(os.devnull, "r+b")) for _ in range(3)]
        request = {"module": module, "args": args, "cwd": str(cwd), "env": env}
        with zygote().command(request, [s.fileno() for s in streams]) as command:
            yield command


COMMAND_ENV = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _read(stream) -> bytes:
    stream.seek(0)
    return stream.read()


class Zygote:
    """The client side of tests/zygote.py: one per run, which its test processes share."""

    def __init__(self, pid: int, path: str) -> None:
        self.pid, self.path = pid, path
        self.stand_in = stand_in_of(path)  # its commands' interpreter

    def start(self, request: dict, fds: list[int]) -> Command:
        """Fork the command `request` names, `fds` its stdin, stdout and stderr."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.path)
        socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], fds)
        return Command(connection)

    @contextmanager
    def command(self, request: dict, fds: list[int]) -> Iterator[Command]:
        command = self.start(request, fds)
        try:
            yield command
        finally:
            command.connection.close()


class Command:
    """One command forked by the zygote, as a Popen: `pid`, then `returncode`, `poll()` and
    `wait(timeout)`, read from the socket (what nmt.serving.launch needs of a server too)."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.pid = int(self._line())
        self.returncode: int | None = None

    def _line(self) -> bytes:
        line = b""
        while not line.endswith(b"\n"):
            byte = self.connection.recv(1)
            if not byte:
                raise RuntimeError(f"the zygote's waiter of pid {self.pid} is gone")
            line += byte
        return line

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self.connection], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            self.returncode = int(self._line())
            self.connection.close()
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None


def zygote_serve(args: list[str], env: dict | None, log) -> Command:
    """nmt.serving.launch's `start`: `python -m nmt.serve args` forked from the zygote, in a
    session of its own, on one thread, logging into `log`, so a test's server does not pay
    the imports again (its model workers, which LitServe spawns, still do)."""
    env = {**(env or os.environ), **COMMAND_ENV}
    request = {"module": "nmt.serve", "args": args, "cwd": str(ROOT), "env": env, "session": True}
    with open(os.devnull, "rb") as stdin:
        return zygote().start(request, [stdin.fileno(), log.fileno(), log.fileno()])


_SERVER_PROCESSES: dict = {}  # url -> the psutil.Process server_process found for it


def server_process(url: str):
    """The main process (a psutil.Process) of the server at `url` that this test process
    started, cold or forked from the zygote: the first of its descendants, or of the zygote's,
    to listen on the url's port (a forked server's command line is the zygote's, so the port
    finds it). Found once while it runs: the search reads every descendant's sockets (~30 ms,
    and a memory watch asks ten times a second)."""
    import psutil

    known = _SERVER_PROCESSES.get(url)
    try:
        if known is not None and known.is_running() and known.status() != psutil.STATUS_ZOMBIE:
            return known
    except psutil.NoSuchProcess:
        pass
    port = int(url.rsplit(":", 1)[1])
    listening = []
    started = [psutil.Process(), psutil.Process(zygote().pid)]
    for process in (p for parent in started for p in parent.children(recursive=True)):
        try:
            sockets = process.net_connections("tcp")
        except psutil.Error:
            continue  # ended meanwhile
        if any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets):
            listening.append(process)
    assert listening, f"no process this test started listens on port {port}"
    _SERVER_PROCESSES[url] = min(listening, key=lambda process: process.create_time())
    return _SERVER_PROCESSES[url]


@functools.cache
def tls_context():
    """One TLS context for every call of http_get and http_post. httpx builds one for each
    client it makes (certifi's bundle read and parsed: ~45 ms of CPU), and httpx.get and
    httpx.post make a client a call; the servers under test speak plain HTTP."""
    import ssl

    return ssl.create_default_context()


def http_get(url: str, **kwargs):
    """httpx.get, on a client and connection of its own as ever, without a TLS context of its
    own: 1.6 against 48 ms of CPU a call (a health poll every 0.1 s took half a core)."""
    import httpx

    return httpx.get(url, verify=tls_context(), **kwargs)


def http_post(url: str, **kwargs):
    """httpx.post as http_get does httpx.get."""
    import httpx

    return httpx.post(url, verify=tls_context(), **kwargs)


# The run's zygote, as "PID SOCKET" in the environment the test processes inherit: started
# by the run's main process (pytest_configure, xdist's controller under `make test`), which
# stops it at the end. It imports its libraries at its first command, so a run that starts
# none pays nothing; a run of several test processes, which fork from it, has it import them
# at once. The test processes share one import (~7 CPU-s) between them.
ZYGOTE_ENV = "NMT_TEST_ZYGOTE"


@functools.cache
def zygote() -> Zygote:
    pid, path = os.environ[ZYGOTE_ENV].split(" ", 1)
    return Zygote(int(pid), path)


def start_zygote(preload_now: bool = False) -> tuple[subprocess.Popen, str]:
    """tests/zygote.py listening on a socket in a folder of its own: (its process, the
    folder), once it is ready; with `preload_now`, importing its libraries from then on (xdist's
    test processes will fork from it) rather than at its first command."""
    folder = tempfile.mkdtemp(prefix="nmt-zygote-")
    path = os.path.join(folder, "socket")
    command = [sys.executable, str(ROOT / "tests" / "zygote.py"), path]
    process = subprocess.Popen(
        command + ["--preload-now"] if preload_now else command,
        env={**os.environ, **COMMAND_ENV},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert process.stdout.readline() == b"ready\n", "tests/zygote.py did not start"
    process.stdout.close()
    os.environ[ZYGOTE_ENV] = f"{process.pid} {path}"
    return process, folder


_STARTED: list[tuple[subprocess.Popen, str]] = []  # the zygote this process started


def pytest_unconfigure() -> None:
    for process, folder in _STARTED:
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


# --- data: the real Multi30k files and a tiny tokenizer trained on them ---

MULTI30K_FILES = [
    f"{split}.{lang}" for split in ("train", "val", "test_2016_flickr") for lang in ("en", "de")
]


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The folder of Multi30k's {train,val,test_2016_flickr}.{en,de} raw text files, found as
    every command finds it (nmt.data.sources.local_multi30k), else downloaded once from the
    canonical URLs into ~/.cache/nmt (a user's machine)."""
    from data_skips import MISSING_DATA

    from nmt.config import DataConfig
    from nmt.data.sources import download_multi30k, local_multi30k

    cfg = DataConfig(source="multi30k", name="multi30k")
    folder = local_multi30k(cfg)
    if folder is not None and all((folder / name).is_file() for name in MULTI30K_FILES):
        return folder
    try:
        for split in ("train", "val", "test_2016_flickr"):
            folder = download_multi30k(cfg, split)
    except OSError as error:
        pytest.skip(
            f"{MISSING_DATA} ({folder or 'no NMT_DATA_DIR, no ../shared/data/multi30k'}) "
            f"and not downloadable ({error}): set NMT_DATA_DIR"
        )
    return folder


def head(path: Path, n: int) -> list[str]:
    """The first n lines of a text file, without their newline."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.removesuffix("\n") for line in islice(f, n)]


@pytest.fixture(scope="session")
def tiny_tokenizer(multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A 1000-piece joint BPE model over the first 3000 Multi30k training pairs (about 1 s)."""
    from nmt.tokenizer_training import train_or_load

    texts = head(multi30k_dir / "train.en", 3000) + head(multi30k_dir / "train.de", 3000)
    cfg = TokenizerConfig(
        name="tiny", dir=str(tmp_path_factory.mktemp("tokenizer")), vocab_size=1000
    )
    return train_or_load(cfg, texts, "multi30k train[:3000] en+de")


# --- training: the real config, shrunk, and the one tiny model trained per session ---

OVERFIT_PAIRS = 64

# multi30k_cpu shrunk to seconds on 2 cores: what the decoding, translate and evaluate tests
# share. The model memorises OVERFIT_PAIRS training pairs, which are also its val/test split.
TINY_TRAINING = [
    "experiment=multi30k_cpu",
    "model.d_model=64",
    "model.n_heads=4",
    "model.d_ff=128",
    "model.encoder_layers=2",
    "model.decoder_layers=2",
    "model.dropout=0.0",
    "data.bpe_dropout=0.0",  # memorised in the tokenizer's own pieces, whatever the recipe says
    # no guided alignment: the tests of raw attention need a model without; those of guided
    # alignment train their own
    "data.word_alignments=false",
    # no training views: memorised as written, whatever the recipe's mix
    *(f"data.augment.{view}=0" for view in ("upper", "title", "unpunctuated", "numbers", "merged")),
    "optim.alignment_weight=0.0",
    "model.alignment_heads=0",
    "model.alignment_layer=-1",  # their last layer, which these tests were written against
    "budget_bands=[]",  # the settings above, whatever the tiny budget (test_budget_bands)
    "tokenizer.vocab_size=500",
    "tokenizer.name=overfit",
    "data.max_tokens=8192",  # all pairs in one batch: one step per epoch
    "optim.warmup_steps=40",
    "optim.lr_scale=0.15",
    "trainer.max_steps=200",
    "trainer.check_val_every_n_epoch=100",
    "trainer.log_every_n_steps=1",  # one batch an epoch: a longer interval draws a warning
    "trainer.enable_progress_bar=false",
    "checkpoint.save_top_k=1",
    "checkpoint.average_last_epochs=[]",
    "trainer.precision=32-true",
    "trainer.max_time=null",
    # no final evaluation: an untrained model's search runs to its length limit (~4 s of a
    # 6 s run); the overfit run, and the tests of the final evaluation, ask for theirs
    "final_evaluation.splits=[]",
]


def module_settings(compile_model: bool = False) -> dict:
    """TranslationModule's keyword settings for a module built by hand in a test: en->de, no
    validation BLEU, stop on a non-finite loss; `compile_model` as asked."""
    return dict(
        src_lang="en",
        tgt_lang="de",
        val_bleu=False,
        compile_model=compile_model,
        on_nonfinite_loss="stop",
    )


def compose_train_config(overrides: list[str]):
    """The real training config (nmt/conf/train.yaml) with overrides, as a typed TrainConfig;
    the experiment this machine would pick unless `overrides` name one."""
    from nmt.training.experiment_choice import with_experiment

    return compose("train", with_experiment(overrides)[0])


def write_split_files(folder: Path, pairs: dict[str, tuple[list[str], list[str]]]) -> Path:
    """{split: (en lines, de lines)} -> folder/{split}.{en,de}."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, (en, de) in pairs.items():
        (folder / f"{split}.en").write_text("".join(line + "\n" for line in en), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(line + "\n" for line in de), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def overfit_pairs(multi30k_dir: Path) -> tuple[list[str], list[str]]:
    """The first OVERFIT_PAIRS real Multi30k training pairs (en, de)."""
    return head(multi30k_dir / "train.en", OVERFIT_PAIRS), head(
        multi30k_dir / "train.de", OVERFIT_PAIRS
    )


@pytest.fixture(scope="session")
def overfit_data(overfit_pairs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Multi30k-layout folder whose train, val and test splits are all the overfit pairs."""
    splits = {split: overfit_pairs for split in ("train", "val", "test_2016_flickr")}
    return write_split_files(tmp_path_factory.mktemp("overfit_data"), splits)


# The shared overfit model's schedule: 160 updates on two length-sorted batches (80 epochs,
# validated at the last) rather than TINY_TRAINING's one batch of all 64 pairs, padded to the
# longest: every pair memorised in half the CPU of 120 updates on that one batch.
OVERFIT_SCHEDULE = (
    "data.max_tokens=2048",
    "trainer.max_steps=160",
    "trainer.check_val_every_n_epoch=80",
    "optim.lr_scale=0.15",
    "optim.warmup_steps=24",
)


def overfit_training(data_dir: Path, work_dir: Path, *extra: str) -> list[str]:
    """TINY_TRAINING on the pair files in data_dir, with the datasets cache and the tokenizer
    under work_dir, then `extra` (later overrides win)."""
    return [
        *TINY_TRAINING,
        f"data.dir={data_dir}",
        f"data.cache_dir={work_dir / 'cache'}",
        f"tokenizer.dir={work_dir / 'tok'}",
        *extra,
    ]


@contextmanager
def built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, bool]]:
    """A folder every test process of this run shares, under a lock: (the folder, whether it
    is still to be built). A process that finds it built copies nothing and waits for no one
    but a process building it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / f"shared_{name}"
    with FileLock(str(folder) + ".lock"):
        yield folder, not (folder / ".built").exists()
        (folder / ".built").touch()


@pytest.fixture(scope="session")
def overfit_run(overfit_pairs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder of `nmt.train` (real code, real config shrunk) whose model memorised the
    overfit pairs: model.pt, checkpoints/, logs/, metrics.json. Trained once for all test
    processes (~12 s on a core), then copied into each, which may change its copy."""
    from nmt.training.fit import train

    with built_once(tmp_path_factory, "overfit_run") as (shared, to_build):
        if to_build:
            splits = {split: overfit_pairs for split in ("train", "val", "test_2016_flickr")}
            data = write_split_files(shared / "data", splits)
            run = shared / "run"
            run.mkdir()
            evaluated = "final_evaluation.splits=[valid,test]"  # the recipe's: a test reads it
            train(
                compose_train_config(overfit_training(data, run, *OVERFIT_SCHEDULE, evaluated)), run
            )
    run_dir = tmp_path_factory.mktemp("overfit_run")
    shutil.copytree(shared / "run", run_dir, dirs_exist_ok=True, symlinks=True)
    return run_dir


@pytest.fixture(scope="session")
def overfit_engine(overfit_run: Path):
    """The overfit run's inference checkpoint, loaded in our torch engine (4,096 tokens a
    batch), in float32 on the CPU."""
    from nmt.inference.torch_engine import TorchEngine

    return TorchEngine.load([str(overfit_run / "model.pt")], "cpu", "float32", 4096)


@pytest.fixture(scope="session")
def model_pt(overfit_run: Path) -> Path:
    """The overfit run's inference checkpoint."""
    return overfit_run / "model.pt"


@pytest.fixture(scope="session")
def ct2_f32_dir(overfit_engine, tmp_path_factory) -> Path:
    """The overfit model exported to CTranslate2 in float32 (the same numbers as torch's, to
    rounding)."""
    from nmt.ct2.model_dir import export

    return export(overfit_engine, tmp_path_factory.mktemp("ct2") / "f32", "float32", False)


@pytest.fixture(scope="session")
def ct2_f32(ct2_f32_dir):
    """ct2_f32_dir loaded on one thread, 1,024 tokens a batch."""
    from nmt.inference.ct2_engine import CTranslate2Engine

    return CTranslate2Engine(ct2_f32_dir, "cpu", "default", 1, 1024)


@pytest.fixture(scope="session")
def ct2_int8(overfit_engine, tmp_path_factory) -> Path:
    """The overfit model's CTranslate2 export in int8 (what `nmt.export` writes by default)."""
    from nmt.ct2.model_dir import export

    return export(overfit_engine, tmp_path_factory.mktemp("ct2") / "int8", "int8", False)


def word_translator(change=str.upper, reverse: bool = False, swap: int | None = None):
    """A stand-in translator for documents (translate_pages' `translate`): each word
    changed by `change`, word i aligned to word i (or with `reverse`, to word n-1-i: an
    alignment that crosses everything); with `swap`, words swap and swap+1 change places in
    the target, aligned where they went; the text's outer whitespace kept."""
    from nmt.translation.translated import Translation

    def translate(texts: list[str], numbers: list[int]):
        found = []
        for text in texts:
            words = text.split()
            n = len(words)
            order = list(range(n))  # target word j is source word order[j]
            if swap is not None and swap + 1 < n:
                order[swap], order[swap + 1] = order[swap + 1], order[swap]
            lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
            target = lead + " ".join(change(words[i]) for i in order) + trail
            pairs = sorted((i, n - 1 - j if reverse else j) for j, i in enumerate(order))
            found.append(Translation(text, alternatives=[(target, 0.0)], alignments=[pairs]))
        return found

    return translate


uppercase_translator = word_translator()
identity_translator = word_translator(str)
reversed_translator = word_translator(reverse=True)


# --- documents through the one job path (nmt.jobs), as every door translates them ---


def document_result(translate, fmt: str, texts=None, data=None, name="", **options):
    """A job of HTML `texts` or a file's `data` in format `fmt` (and Job `options`), checked
    without limits and run on `translate` (jobs.run's Translator)."""
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, Limits
    from nmt.jobs.run import run

    job = Job(texts=texts, data=data, name=name, format=fmt, **options)
    return run(check(job, Limits.unbounded()), translate)


def stand_in(translate):
    """A Translator (jobs.run's) from a stand-in `translate(texts, numbers)`."""
    return lambda texts, numbers, prefixes, alignments, scores: translate(texts, numbers)


def html_pages(translate, documents: list[str]):
    """HTML documents translated by a stand-in `translate(texts, numbers)`."""
    return document_result(stand_in(translate), "html", texts=documents).translations


def translated_word_file(data: bytes, translate) -> bytes:
    """A Word file translated by a stand-in `translate(texts, numbers)`."""
    return document_result(stand_in(translate), "docx", data=data, name="a.docx").data


def on_engine(engine, search, segment: str = "sentences", splitter=None):
    """The Translator that decodes on `engine` with `search` (nmt.jobs.run)."""
    from nmt.jobs.job import Job
    from nmt.jobs.run import engine_translator
    from nmt.translation.sentences import SentenceSplitter

    job = Job(search=search, segment=segment)
    return engine_translator(engine, job, splitter or SentenceSplitter())


def translated_html(engine, documents: list[str], search, segment="sentences", splitter=None):
    """HTML documents translated on `engine`, as POST /translate with format html does."""
    translate = on_engine(engine, search, segment, splitter)
    return document_result(translate, "html", texts=documents).translations


def translated_docx(engine, data: bytes, search, segment="sentences") -> bytes:
    """A Word file translated on `engine`, as `translate input=a.docx` does."""
    return document_result(on_engine(engine, search, segment), "docx", data=data).data


def worker_takes(api, bodies: list[dict]) -> tuple[list, list]:
    """The /translate request bodies as a model worker takes them: read and checked as the
    door does, then each plan's Works (nmt.serving.dispatch), taken by TranslationAPI:
    (request, plan, its count of works) per body, and the works taken."""
    from nmt.jobs.check import check
    from nmt.jobs.job import Limits
    from nmt.serving.dispatch import works
    from nmt.serving.schema import TranslateRequest, request_job

    plans, taken = [], []
    for body in bodies:
        request = TranslateRequest.model_validate(body)
        plan = check(request_job(request, api.search, api.cfg), Limits.unbounded())
        mine = works(plan, api.cfg.max_lines, api.cfg.glossary)
        plans.append((request, plan, len(mine)))
        taken += [api.decode_request(work) for work in mine]
    return plans, taken


def worker_answers(api, bodies: list[dict]) -> list:
    """TranslationAPI.predict on these request bodies taken together (`worker_takes`), as
    a worker's batch, each answered in its shape as the server's /translate answers: a dict,
    or the Failure of its work."""
    from nmt.jobs.run import finished
    from nmt.serving.api import Failure
    from nmt.serving.schema import response

    plans, mine = worker_takes(api, bodies)
    found = iter(api.predict(mine))
    answers = []
    for request, plan, count in plans:
        parts = [next(found) for _ in range(count)]
        failed = next((part for part in parts if isinstance(part, Failure)), None)
        if failed is not None:
            answers.append(failed)
            continue
        result = finished(plan, [t for part in parts for t in part])
        search = api.engine.runnable(plan.job.search)[0]
        answers.append(
            response(request, result.translations, api.model_name, api.engine.name, search)
        )
    return answers
