"""An MkDocs hook: serve KaTeX from the site itself, so formulas render without a network.

The site renders its ``$...$`` math in the browser with KaTeX (docs/javascripts/katex.js).
Loaded from a CDN, every formula showed as raw TeX offline (a laptop on a train, a
mirror behind a firewall). This hook adds KaTeX's script, auto-render extension,
stylesheet and fonts to the built site under ``katex/``, where mkdocs.yml's
``extra_javascript`` and ``extra_css`` point; ``mkdocs serve`` serves them the same way.

The files come from the ``katex`` npm package: the one ``.ci/run`` installs into
``.ci/node_modules`` (``npm install --prefix .ci --no-save katex@0.16.11``), which
tests/test_katex.py also renders every exported formula with, so the site and the
tests use the same KaTeX. A folder holding ``katex`` on ``NODE_PATH`` works too. They
are copied at build time, never committed (git ignores ``.ci/node_modules`` and
``site/``). Without them the build stops and says how to install them, rather than
building a site whose formulas do not render.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

#: The KaTeX the site serves: the version .ci/run installs and tests/test_katex.py renders with.
KATEX_VERSION = "0.16.11"
#: Where in the built site KaTeX's files go (mkdocs.yml refers to them there).
SITE_FOLDER = "katex"
#: What the pages need from KaTeX's dist/ folder (fonts: every file of dist/fonts/).
DIST_FILES = ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js")
INSTALL = f"npm install --prefix .ci --no-save --no-package-lock katex@{KATEX_VERSION}"


def find_katex(root: Path) -> Path:
    """The ``katex`` package folder: ``.ci/node_modules/katex`` or one on ``NODE_PATH``."""
    candidates = [root / ".ci" / "node_modules" / "katex"]
    candidates += [Path(folder) / "katex"
                   for folder in os.environ.get("NODE_PATH", "").split(os.pathsep) if folder]
    for candidate in candidates:
        if (candidate / "package.json").is_file():
            version = json.loads((candidate / "package.json").read_text())["version"]
            if version != KATEX_VERSION:
                raise PluginError(f"{candidate} is KaTeX {version}; the site serves "
                                  f"{KATEX_VERSION} (docs/ext/katex_assets.py): {INSTALL}")
            return candidate
    raise PluginError(
        "KaTeX is not installed, and the site serves it itself so that formulas render "
        f"offline: run `{INSTALL}` in the repository (needs node and npm; .ci/run does it), "
        "or put a folder holding the katex package on NODE_PATH")


def on_files(files, config):
    """Add KaTeX's files to the site, as if they were in docs/katex/."""
    dist = find_katex(Path(config.config_file_path).resolve().parent) / "dist"
    wanted = [dist / name for name in DIST_FILES] + sorted((dist / "fonts").iterdir())
    for path in wanted:
        relative = path.relative_to(dist).as_posix()
        files.append(File.generated(config, f"{SITE_FOLDER}/{relative}", abs_src_path=str(path)))
    return files
