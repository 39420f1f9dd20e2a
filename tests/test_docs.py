"""What the README says about the project agrees with the project itself."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
NUMBERS = {2: "Both", 3: "All three", 4: "All four", 5: "All five"}


def shipped_notebooks() -> list[str]:
    """The project's notebooks: the tracked ones in a git checkout (a scratch notebook of
    yours in notebooks/ is not one), every one in notebooks/ elsewhere (an sdist)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "--", "notebooks/*.ipynb"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return sorted(Path(line).name for line in done.stdout.splitlines())
    return sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))


def test_the_notebooks_sentence_counts_the_notebooks_listed():
    section = README[README.index("## Notebooks") :]
    section = section[: section.index("\n## ", 1)]
    listed = re.findall(r"^- `notebooks/([^`]+\.ipynb)`", section, flags=re.M)
    assert sorted(listed) == shipped_notebooks()
    assert f"{NUMBERS[len(listed)]} run on a CPU-only machine" in section


def test_a_scratch_notebook_of_the_users_is_not_counted(tmp_path):
    """A notebook of your own in notebooks/, untracked (or the demo's copies elsewhere),
    changes nothing the tests read."""
    scratch = ROOT / "notebooks" / f"scratch-{tmp_path.name}.ipynb"
    scratch.write_text("{}", encoding="utf-8")
    try:
        names = shipped_notebooks()
    finally:
        scratch.unlink()
    tracked = subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True)
    if tracked.returncode == 0:
        assert scratch.name not in names


def test_make_bench_duration_is_the_same_everywhere():
    said = re.search(r"\(about (\S+ \w+) on 2 cores\)", README.replace("\n", " "))
    assert said, "README: `make bench` (about ... on 2 cores)"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    runner = (ROOT / "benchmarks" / "run.py").read_text(encoding="utf-8")
    assert f"about {said.group(1)} on 2 cores" in makefile
    assert f"about {said.group(1)} on 2 cores" in runner


def test_quickstart_and_readme_name_the_same_config_file():
    named = set(re.findall(r"profile_default/(\w+\.py)", README))
    notebook = json.loads((ROOT / "notebooks" / "01-quickstart.ipynb").read_text(encoding="utf-8"))
    text = "".join("".join(cell["source"]) for cell in notebook["cells"])
    assert named == set(re.findall(r"profile_default/(\w+\.py)", text)) == {"ipython_config.py"}


def test_readme_shows_the_torchrun_commands():
    assert "python -m ipydevice torchrun --nproc-per-node 2 train.py" in README
    assert "torchrun --nproc-per-node 2 -m ipydevice run train.py" in README


def test_where_it_works_names_each_place_and_what_insert_does():
    section = README[README.index("## Where it works") :]
    section = section[: section.index("\n## ", 1)]
    rows = {
        line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")
    }
    for place in ("JupyterLab 4, Notebook 7", "VS Code (Jupyter extension)", "Google Colab"):
        assert "**Insert**" in rows[place], place
    assert "directly below the failed cell" in rows["JupyterLab 4, Notebook 7"]
    for place in ("VS Code (Jupyter extension)", "Google Colab"):
        assert "set_next_input" in rows[place], place
    for place in ("IPython in a terminal", "Scripts", "torchrun", "accelerate", "pytest"):
        assert place in rows, place
    assert "python -m ipydevice torchrun --nproc-per-node 2 train.py" in rows["torchrun"]
    assert "accelerate launch --num_processes 2 -m ipydevice run train.py" in rows["accelerate"]


def test_the_insert_fallback_says_what_the_readme_says():
    """The status line of Insert where a front end cannot add cells, and the README's words."""
    from ipydevice.render import widget

    source = Path(widget.__file__).read_text(encoding="utf-8")
    assert "below the next cell you run" in source
    assert "under the next cell you run" in README or "after the cell you run next" in README


def test_the_error_family_page_example_runs_and_reads_what_it_says():
    """docs/error-families.md: its example registers, and a message of that wording gives
    the devices, the argument and the offending and expected devices the page says; the
    README links to the page; each key ``wording()`` takes is explained."""
    import inspect

    from ipydevice import plugins
    from ipydevice.diagnosis.recognise import recognise
    from ipydevice.family import Wording

    page = (ROOT / "docs" / "error-families.md").read_text(encoding="utf-8")
    assert "(docs/error-families.md)" in README
    (example,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    exec(compile(example, "error-families.md", "exec"), {})
    try:
        facts = recognise("toykernel: q on cuda:0 but k on cpu.", "RuntimeError")
        assert facts.family == "toy_kernel" and facts.devices == ("cuda:0", "cpu")
        assert (facts.argument, facts.expected, facts.offending) == ("k", "cuda:0", "cpu")
        # a variation: another device pair, the message wrapped over two lines
        facts = recognise("toykernel: q on cuda:1\nbut k on meta", "RuntimeError")
        assert (facts.expected, facts.offending) == ("cuda:1", "meta")
    finally:
        assert plugins.remove("toy_kernel")
    keys = set(inspect.signature(Wording).parameters) - {"family", "key", "pattern", "dev_groups"}
    for key in keys | {"@D", "@E", "d1", "o1", "lst"}:
        assert f"`{key}`" in page, key
