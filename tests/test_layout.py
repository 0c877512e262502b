"""The package's shape: what imports what, and a wheel that works outside the checkout."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from conftest import ROOT, run_module

FRAMEWORKS = ("hydra", "lightning", "lightning_fabric", "pytorch_lightning", "datasets")


def frameworks_after(*groups: list[str]) -> list[list[str]]:
    """One fresh interpreter imports each group of modules in turn; after each, the modules it
    holds of FRAMEWORKS or sentencepiece. The lists only grow: a group whose list is free of a
    framework loads none of it, alone or after the groups before it."""
    watched = (*FRAMEWORKS, "sentencepiece")
    code = (
        "import sys, json\nseen = []\n"
        f"for group in {[list(g) for g in groups]!r}:\n"
        "    for m in group: __import__(m)\n"
        f"    seen.append(sorted(m for m in sys.modules if m.split('.')[0] in {watched!r}))\n"
        "print(json.dumps(seen))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return json.loads(done.stdout)


def test_the_model_searches_engines_and_evaluation_load_no_framework():
    """Neither hydra, lightning nor datasets below the entry points; the model and the searches
    not even sentencepiece; evaluation and reports no Lightning. One interpreter, the layers
    imported from the bottom up (each list holds what the layers below it loaded too)."""
    lean = ["nmt.model", "nmt.decoding.search", "nmt.decoding.settings"]
    core = ["nmt.tokenizer", "nmt.checkpoint", "nmt.decoding.beam"]
    engines = ["nmt.inference.loading", "nmt.inference.torch_engine", "nmt.inference.ct2_engine"]
    engines += ["nmt.inference.search_choice", "nmt.ct2.spec"]
    evaluation = ["nmt.evaluation.evaluation_run", "nmt.evaluation.runs_table"]
    after = frameworks_after(lean, core, engines, evaluation)
    assert after[0] == []
    assert [m for m in after[2] if m.split(".")[0] in FRAMEWORKS] == []
    assert "sentencepiece" in after[1]  # the watch sees what is imported
    assert not [m for m in after[3] if "lightning" in m]


FORMAT_LIBRARIES = ("docx", "pptx", "lxml", "markdown_it", "polib", "srt", "webvtt")


def test_a_formats_library_loads_with_its_reader_not_before():
    """The format table names its readers, which are imported when first called: the translate
    command and a model worker start without any file format's library (~0.25 s a start),
    and a Word file's reader brings python-docx and lxml, nothing else of the list."""
    code = (
        "import sys, json\nimport nmt.translate, nmt.serving.api\n"
        "from nmt.documents.formats import FORMATS, loaded_reader\n"
        f"libraries = set({FORMAT_LIBRARIES!r})\n"
        "loaded = lambda: sorted(libraries & {m.split('.')[0] for m in sys.modules})\n"
        "before = loaded()\nloaded_reader(FORMATS['docx'].file_reader)\n"
        "print(json.dumps([before, loaded()]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert json.loads(done.stdout) == [[], ["docx", "lxml"]]


def test_no_caller_outside_the_engines_asks_which_engine_it_holds():
    """Only nmt/inference/ may branch on which engine it holds (isinstance, backend= or the
    engine's name): everything else goes through the Engine interface."""
    pattern = re.compile(
        r"isinstance\([^)]*(Engine|Translator)\b|"
        r"\.backend\s*[!=]=|backend\s*[!=]=\s*[\"']|\.name\s*[!=]=\s*[\"'](torch|ctranslate2)"
    )
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "nmt").rglob("*.py")
        if "inference" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert offenders == []


def imports_of(path: Path) -> set[str]:
    """Top-level packages a source file imports, anywhere in it."""
    text = path.read_text()
    found = re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", text, flags=re.MULTILINE)
    return {name.split(".")[0] for name in found}


def test_only_training_and_the_datamodule_import_lightning_and_only_config_registers():
    package = ROOT / "nmt"
    lightning = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if imports_of(p) & {"lightning", "pytorch_lightning"}
    )
    assert lightning and all(
        p.startswith("training/") or p == "data/datamodule.py" for p in lightning
    ), lightning
    registering = [p.name for p in package.rglob("*.py") if "ConfigStore" in p.read_text()]
    assert registering == ["config.py"]


def test_a_wheel_installed_in_a_fresh_venv_runs_the_commands_from_anywhere(
    model_pt, overfit_pairs, tmp_path
):
    """Built from the checkout's tracked files, installed without the checkout on the path:
    the configs ship inside the package."""
    source = tmp_path / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "pyproject.toml", "README.md", "nmt"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("nmt-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The dependencies come from this environment, through a path file: only nmt is new.
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)}

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [python, *args], input=stdin, capture_output=True, text=True, cwd=elsewhere, env=env
        )

    where = run("-c", "import nmt.config as c; print(c.__file__); print(c.CONF_DIR)")
    module_file, conf_dir = where.stdout.split()
    assert module_file.startswith(str(venv)) and Path(conf_dir, "train.yaml").is_file()
    sources, references = overfit_pairs
    done = run("-m", "nmt.translate", f"ckpt={model_pt}", stdin=sources[0] + "\n")
    assert done.returncode == 0 and done.stdout == references[0] + "\n", done.stderr[-2000:]
    done = run("-m", "nmt.train", "experiment=multi30k_cpu", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "experiment_name: multi30k_cpu" in done.stdout and "d_model: 128" in done.stdout
    assert not (elsewhere / "outputs").exists()


def test_every_command_answers_a_missing_setting_in_one_line(tmp_path):
    done = run_module("nmt.average", [], tmp_path)
    (line,) = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and line.startswith("nmt.average: error: give dir=FOLDER")
    done = run_module("nmt.report", [], tmp_path)
    assert (
        done.returncode == 2 and "the following arguments are required: dir" in done.stderr.decode()
    )


def test_the_module_map_names_every_module_and_only_those():
    """Every .py file of nmt/ (but __init__.py) is in docs/architecture.md's table of modules,
    and every file the table names exists."""
    readme = (ROOT / "docs" / "architecture.md").read_text()
    table = readme[readme.index("| module | what it holds |") :].split("\n\n")[0]
    named = set()
    for cell in re.findall(r"^\| (.+?) \|", table, flags=re.MULTILINE)[2:]:
        paths = re.findall(r"`([^`]+)`", cell)
        folder = Path(paths[0]).parent
        named |= {str(Path(p) if "/" in p else folder / p) for p in paths}
    modules = {
        str(p.relative_to(ROOT)) for p in (ROOT / "nmt").rglob("*.py") if p.name != "__init__.py"
    }
    assert modules - named == set(), "modules the module map does not name"
    assert {p for p in named if p.endswith(".py")} - modules == set(), "named but not there"


def module_level_names() -> dict[str, list[str]]:
    """Each class and UPPER_CASE constant defined at the top of a module of nmt/ -> where."""
    import ast

    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "nmt").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = [node.name] if isinstance(node, ast.ClassDef) else []
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
            for name in names:
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_names_are_unique_across_the_package():
    """A class or a constant means one thing: no two modules define the same name (each
    command's EXAMPLE line aside)."""
    twice = {n: where for n, where in module_level_names().items() if len(where) > 1}
    assert {n: w for n, w in twice.items() if n != "EXAMPLE"} == {}


def test_each_rule_has_one_home():
    """The segment names live in config.py, the format suffixes and media types in the format
    table, the limits in RequestLimits: a second copy of any of them fails here."""
    from dataclasses import fields

    from nmt.config import RequestLimits, ServeConfig
    from nmt.jobs.job import Limits

    homes = {
        '"sentences", "lines"': "nmt/config.py",
        '".docx"': "nmt/documents/formats.py",
        '".htm"': "nmt/documents/formats.py",
        "wordprocessingml": "nmt/documents/formats.py",
    }
    for text, home in homes.items():
        holders = [
            str(p.relative_to(ROOT))
            for p in (ROOT / "nmt").rglob("*.py")
            if text in p.read_text(encoding="utf-8")
        ]
        assert holders == [home], (text, holders)
    limits = [f.name for f in fields(RequestLimits)]
    assert [f.name for f in fields(Limits)] == [
        *limits,
        "max_output_tokens",
        "state_bytes_per_token",
    ]
    assert set(limits) <= {f.name for f in fields(ServeConfig)}
    for path in (ROOT / "nmt" / "serving").glob("*.py"):  # no hand-kept list of limit names
        assert '"max_file_segments"' not in path.read_text(encoding="utf-8"), path


def test_config_stands_on_the_ground_floor_and_errors_below_everything():
    """config.py imports no room of the package but the ground floor's, and errors.py none."""
    ground = {"nmt.cpu", "nmt.vocabulary", "nmt.errors"}
    for name, allowed in (("config.py", ground), ("errors.py", set())):
        text = (ROOT / "nmt" / name).read_text()
        imported = set(re.findall(r"^\s*(?:from|import) (nmt[\w.]*)", text, flags=re.MULTILINE))
        assert imported <= allowed, (name, imported - allowed)
