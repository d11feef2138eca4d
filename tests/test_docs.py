"""Every Python block of README.md and docs/*.md runs, and shown output is what it prints.

The conventions, also described in docs/contributing-docs.md:

- a ```python block runs, top to bottom, in one namespace per page (later blocks
  see the names earlier blocks defined), in a fresh temporary directory;
- a block written as a doctest (its first line starts with ``>>> ``) is run by
  :mod:`doctest`, so every output it shows is checked (``...`` matches anything);
- a ```latex block right after a Python block is exactly what that block prints;
  a ```c block right after one is part of the string ``source`` it defined;
- a block importing an optional extra (dask, distributed, numba, matplotlib) that is not
  installed skips the rest of its page;
- a block preceded by ``<!-- not-run: reason -->`` is skipped; the reason must say
  what it needs (a cluster, a GPU, ...). Blocks in other languages never run.
"""

import contextlib
import doctest
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
BLOCK = re.compile(r"(<!--\s*not-run:(?P<reason>[^>]*)-->\s*\n)?```(?P<language>\w*)\n(?P<code>.*?)```", re.S)
#: Optional dependencies (extras) a page may use: without them the rest of the page is skipped.
OPTIONAL = {"dask", "distributed", "numba", "matplotlib"}
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, not-run reason or None) of every fenced block of a page."""
    found = []
    for match in BLOCK.finditer(page.read_text()):
        reason = match.group("reason")
        found.append((match.group("language"), match.group("code"),
                      None if reason is None else reason.strip()))
    return found


def run_page(page: Path) -> int:
    """Run a page's Python blocks; return how many shown outputs were checked."""
    found = blocks(page)
    namespace: dict = {"__name__": "__docs__"}
    checked = 0
    for index, (language, code, reason) in enumerate(found):
        if language != "python":
            continue
        if reason is not None:
            assert reason, f"{page.name} block {index}: a not-run block must say why"
            continue
        where = f"{page.name} block {index}"
        if code.lstrip().startswith(">>> "):
            test = doctest.DocTestParser().get_doctest(code, namespace, where, str(page), 0)
            runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
            report = io.StringIO()
            runner.run(test, out=report.write, clear_globs=False)
            assert runner.failures == 0, report.getvalue()
            namespace.update(test.globs)
            checked += sum(bool(example.want) for example in test.examples)
            continue
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output):
                exec(compile(code, where, "exec"), namespace)  # noqa: S102 - our own docs
        except ModuleNotFoundError as error:
            if error.name not in OPTIONAL:
                raise
            pytest.skip(f"{where} needs {error.name} (an optional extra), not installed")
        following = found[index + 1] if index + 1 < len(found) else None
        if following and following[0] == "latex":
            assert output.getvalue().strip() == following[1].strip(), where
            checked += 1
        elif following and following[0] == "c":
            assert following[1].strip() in namespace["source"], where
            checked += 1
    return checked


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_page(page)


def test_shown_outputs_are_checked():
    # The pages that show outputs keep showing them (the test above checks them).
    assert run_page(DOCS / "formulas.md") == 15
    assert run_page(ROOT / "README.md") >= 5


def test_the_console_examples_match_the_command(capsys):
    from symad.cli import main

    session = next(code for language, code, _ in blocks(DOCS / "formulas.md")
                   if language == "console")
    command, expected = None, []
    for line in session.splitlines() + ["$ end"]:
        if line.startswith("$ "):
            if command and expected:
                assert main(_split(command)[1:]) == 0
                assert capsys.readouterr().out.splitlines() == expected
            command, expected = line[2:], []
        else:
            expected.append(line)


def _split(command):
    import shlex

    return shlex.split(command)


@pytest.mark.parametrize("option", ["output_names", "temporaries", "inline_below", "max_inline",
                                    "matrix", "max_denominator", "simplify", "numbers",
                                    "max_temporaries", "simplify_below", "simplify_time"])
def test_every_documented_option_exists(option):
    import inspect

    from symad.export.latex import function_latex

    assert option in inspect.signature(function_latex).parameters
    assert f"`{option}`" in (DOCS / "formulas.md").read_text()


def test_the_benchmark_plots_read_the_tables_of_the_page():
    import importlib.util

    spec = importlib.util.spec_from_file_location("plot_benchmarks", DOCS / "ext" / "plot_benchmarks.py")
    plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    text = (DOCS / "benchmarks.md").read_text()
    n, series = plots.build_data(text)
    assert n[0] == 4 and all(len(values) == len(n) for values in series.values())
    n, series = plots.nth_data(text)
    assert {"symad", "sympy", "jax grad", "jax jet"} <= set(series) and None not in series["symad"]
    for image in ("benchmark_build.png", "benchmark_nth.png", "order_nodes.png"):
        assert f"images/{image}" in text and (DOCS / "images" / image).exists()


def test_every_script_the_docs_cite_exists():
    # benchmarks/nth_derivative.py was replaced by benchmarks/order.py while the page
    # still told readers to run it: a renamed script must take its citations along.
    import re

    root = DOCS.parent
    pages = [root / "README.md", *sorted(DOCS.rglob("*.md"))]
    cited = {(page.name, script) for page in pages
             for script in re.findall(r"\b((?:benchmarks|examples)/[\w/]+\.py)\b", page.read_text())}
    assert any(script == "benchmarks/order.py" for _, script in cited)
    missing = sorted((page, script) for page, script in cited if not (root / script).exists())
    assert not missing, f"pages cite scripts that do not exist: {missing}"


def test_no_page_or_script_cites_a_benchmarks_file_the_project_does_not_have():
    # The benchmark brief is not in the repository: cite it as "the project's benchmark brief".
    scripts = [*sorted((ROOT / "benchmarks").glob("*.py")), *sorted((ROOT / "examples").glob("*.py"))]
    files = [*PAGES, *scripts]
    citing = [str(path.relative_to(ROOT)) for path in files if "BENCHMARKS.md" in path.read_text()]
    assert not (ROOT / "BENCHMARKS.md").exists() and citing == []


# ---------------------------------------------------------------------------
# The site renders its math without a network
# ---------------------------------------------------------------------------
# KaTeX was loaded from a CDN, so offline every formula showed as raw TeX. The site now
# serves KaTeX itself (docs/ext/katex_assets.py copies it in at build time).

EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //host


def _mkdocs_config() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with mkdocs, dask)")

    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml names Python objects (!!python/name:...) that only MkDocs resolves.
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def test_ci_the_site_and_the_katex_tests_use_one_katex_version():
    # The site serves the KaTeX .ci/run installs, and the tests render with the same one.
    import importlib.util

    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    spec = importlib.util.spec_from_file_location("katex_assets", DOCS / "ext" / "katex_assets.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    installed = re.findall(r"katex@([\d.]+)", (ROOT / ".ci" / "run").read_text())
    hinted = re.findall(r"katex@([\d.]+)", (ROOT / "tests" / "test_katex.py").read_text())
    assert set(installed) == set(hinted) == {hook.KATEX_VERSION}


def test_mkdocs_yml_loads_no_script_or_stylesheet_from_another_host():
    config = _mkdocs_config()
    assets = list(config.get("extra_javascript", [])) + list(config.get("extra_css", []))
    assets = [a if isinstance(a, str) else a["path"] for a in assets]
    assert [a for a in assets if EXTERNAL.match(a)] == []
    assert "katex/katex.min.js" in assets and "katex/katex.min.css" in assets
    assert "docs/ext/katex_assets.py" in config.get("hooks", [])
    assert config["theme"].get("font") is False  # Material's default loads Google Fonts


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The site as CI builds it (mkdocs build --strict), or a skip without KaTeX or mkdocs."""
    import importlib.util
    import os
    import subprocess
    import sys

    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    spec = importlib.util.spec_from_file_location("katex_assets", DOCS / "ext" / "katex_assets.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    try:
        hook.find_katex(ROOT)
    except Exception as error:  # mkdocs' PluginError: not installed, or another version
        if os.environ.get("SYMAD_REQUIRE_KATEX") == "1":
            pytest.fail(f"SYMAD_REQUIRE_KATEX=1 but {error}")
        pytest.skip(str(error))
    site = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                            str(site)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert build.returncode == 0, build.stderr[-3000:]
    return site


def test_the_built_site_serves_katex_and_loads_nothing_from_another_host(built_site):
    site = built_site
    loaded = re.compile(r"<(?:script[^>]*\ssrc|link[^>]*\shref)=\"([^\"]+)\"")
    pages_with_math = 0
    for page in sorted(site.rglob("*.html")):
        html = page.read_text()
        references = loaded.findall(html)
        external = [r for r in references if EXTERNAL.match(r)]
        assert external == [], f"{page.relative_to(site)} loads {external}"
        if 'class="arithmatex"' in html:
            pages_with_math += 1
            for asset in ("katex/katex.min.js", "katex/contrib/auto-render.min.js",
                          "katex/katex.min.css"):
                reference = next((r for r in references if r.endswith(asset)), None)
                assert reference is not None, f"{page.relative_to(site)} does not load {asset}"
                assert (page.parent / reference).resolve().is_file(), reference
    assert pages_with_math >= 4  # the tutorials on modes, Jacobians, n-th derivatives, research
    # Every font KaTeX's stylesheet asks for is in the site.
    css = (site / "katex" / "katex.min.css").read_text()
    fonts = set(re.findall(r"url\(([^)]+)\)", css))
    assert fonts and all((site / "katex" / font).is_file() for font in fonts)


def test_the_reference_page_renders_its_docstrings_as_text_a_reader_can_use(built_site):
    import html as html_module

    page = (built_site / "reference" / "index.html").read_text()
    text = html_module.unescape(re.sub(r"<[^>]+>", "", page))
    # Sphinx roles (docs/ext/sphinx_roles.py turns them into code spans)
    assert re.findall(r":(?:class|func|meth|mod|attr|data|exc):`?~?[\w.]+", text) == []
    assert "SPEC" not in text  # the design documents are not part of the site
    # Its table of contents names each module once (it listed symad twice). Material
    # writes the page's contents twice, in the navigation and in the right-hand sidebar.
    toc = page[page.rindex("md-nav--secondary"):page.index('class="md-content"')]
    entries = re.findall(r'href="#([^"]+)"', toc)
    assert entries.count("symad") == 1 and "symad.numpy" in entries and "symad.testing" in entries
    assert len(entries) == len(set(entries))


def test_no_link_text_of_the_site_is_a_bare_file_name():
    # "[special-functions.md](special-functions.md)" read as a file name, not a page title.
    # (README.md names files on purpose: it is read in the repository, beside them.)
    bare = [(page.name, text) for page in PAGES if page.parent != ROOT
            for text in re.findall(r"\[([^\]]+\.md)\]\(", page.read_text())]
    assert bare == []
