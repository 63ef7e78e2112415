"""The HTML report in a real browser: headless Chromium (Debian package ``chromium``).

Checks: no console message at all (the report has no scripts, so any message is an error, a
CSP violation or a script that ran), the phase table is in the rendered DOM, no ``<script>``
element exists after rendering (a trace-provided ``<script>…`` name stayed text), and a
screenshot is not blank. The harness itself is checked on a page that does log and run a
script, so the test can fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import EVIL, sample_activities, sample_doc, sample_top_kernels, sample_top_ops, run_cli, write_tiny_trace  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--enable-logging=stderr", "--v=0"]
CONSOLE_RE = re.compile(r"CONSOLE[^\]]*\]\s*(.*)")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not found: install the Debian package `chromium` (apt-get install -y chromium)")


def run_browser(page: Path, *extra: str) -> tuple[str, list[str]]:
    """Open ``page``; return (stdout, console messages)."""
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile},
        )
    console = [m.group(1) for m in CONSOLE_RE.finditer(proc.stderr)]
    return proc.stdout, console


def non_white_fraction(png: Path) -> float:
    from matplotlib.image import imread

    img = imread(str(png))[..., :3]
    return float((img.min(axis=2) < 0.95).mean())


def check_report_page(page: Path, tmp_path: Path) -> str:
    dom, console = run_browser(page, "--dump-dom")
    assert console == [], f"console messages: {console}"
    assert 'id="phase-table"' in dom
    assert "<script" not in dom.lower(), "a <script> element exists in the rendered DOM"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # the name is shown, as text
    shot = tmp_path / "shot.png"
    run_browser(page, f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars")
    assert shot.is_file()
    # a blank page is 0 % non-white; a report page with tables and plots is several %
    assert non_white_fraction(shot) > 0.02
    return dom


def test_harness_sees_console_errors_and_scripts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("marker-1"); nope();</script></body></html>')
    dom, console = run_browser(bad, "--dump-dom")
    assert any("marker-1" in c for c in console)
    assert any("nope is not defined" in c for c in console)
    assert "<script" in dom.lower()
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    shot = tmp_path / "blank.png"
    run_browser(blank, f"--screenshot={shot}", "--window-size=400,300")
    assert non_white_fraction(shot) < 0.001


def test_html_report_in_browser(tmp_path: Path) -> None:
    from tracekit.report import figures, html, model

    data = model.from_json(sample_doc(), top_kernels=sample_top_kernels(), top_ops=sample_top_ops(),
                           activities=sample_activities())
    page = tmp_path / "report.html"
    page.write_text(html.render(data, figures.draw_all(data)), encoding="utf-8")
    dom = check_report_page(page, tmp_path)
    assert "plot-roofline" in dom


def test_cli_html_report_in_browser(tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "tiny.json")
    page = tmp_path / "tiny.html"
    assert run_cli(["report", str(trace), "--format", "html", "--out", str(page)]) == 0
    text = page.read_text()
    assert EVIL not in text
    check_report_page(page, tmp_path)
