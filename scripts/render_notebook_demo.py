"""Run the notebook of tests/test_notebook.py for real and render it, to look at it.

    python scripts/render_notebook_demo.py OUTDIR

Writes OUTDIR/demo.ipynb (executed), OUTDIR/demo.html (nbconvert) and, when a headless
chromium is installed (``apt-get install -y chromium``), OUTDIR/demo.png. The repository is
a fresh one in OUTDIR/gangadir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from nbconvert import HTMLExporter  # noqa: E402

from tests.test_notebook import build_notebook, install_kernel, run_notebook  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "notebook-demo").resolve()
    out.mkdir(parents=True, exist_ok=True)
    install_kernel(out / "jupyter")
    os.environ.update(
        JUPYTER_PATH=str(out / "jupyter"),
        GANGA_DIR=str(out / "gangadir"),
        XDG_CONFIG_HOME=str(out / "xdg"),
        IPYTHONDIR=str(out / "ipython"),
    )
    nb = run_notebook(build_notebook(), out)
    nbformat.write(nb, out / "demo.ipynb")
    body, _ = HTMLExporter().from_notebook_node(nb)
    (out / "demo.html").write_text(body)
    print(f"wrote {out / 'demo.ipynb'} and {out / 'demo.html'}")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1100,1900",
                f"--screenshot={out / 'demo.png'}",
                (out / "demo.html").as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        print(f"wrote {out / 'demo.png'}")


if __name__ == "__main__":
    main()
