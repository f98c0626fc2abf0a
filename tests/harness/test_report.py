"""The HTML report: self-contained, lists all methods, shows verdicts and figures, renders in Chromium."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from optarium._core.registry import all_methods
from optarium.harness.report import render_report, write_report
from optarium.harness.runner import run_experiment


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    run_experiment("gradpower", "smoke", out=root)
    return root


def test_report_is_self_contained_and_complete(runs_root: Path) -> None:
    text = render_report(runs_root)
    for m in all_methods():
        assert f"<td>{m.slug}</td>" in text or f'href="#{m.slug}"' in text, m.slug
    assert 'id="gradpower"' in text
    assert "no verdict" in text
    assert "Verdict rule" in text and "Deciding figures" in text
    assert text.count("data:image/png;base64,") == 2
    # nothing fetched from the network: no external scripts, styles or images
    assert not re.search(r"<script", text)
    assert not re.search(r"(src|href)=\"https?://", text)


def test_empty_runs_root_still_lists_methods(tmp_path: Path) -> None:
    text = render_report(tmp_path / "none")
    assert "No runs stored yet" in text
    assert text.count("<tr>") == len(all_methods()) + 1


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_embedded_figures_decode_as_png_images(runs_root: Path) -> None:
    from matplotlib.image import imread

    text = render_report(runs_root)
    blobs = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(blobs) == 2
    for blob in blobs:
        image = imread(io.BytesIO(base64.b64decode(blob)), format="png")
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
        assert float(image[..., :3].std()) > 0.01  # not a blank canvas


@pytest.mark.skipif(
    _chromium() is None and not os.environ.get("CI"),
    reason="headless Chromium is not installed (.ci/run installs it; under CI its absence fails this test)",
)
def test_report_renders_in_headless_chromium(runs_root: Path, tmp_path: Path) -> None:
    assert _chromium() is not None, "CI must have headless Chromium: .ci/run installs Debian's chromium"
    report = write_report(runs_root, tmp_path / "report.html")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [_chromium(), *flags, "--window-size=1280,2000", f"--screenshot={shot}", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 10_000  # a real page, not a blank one
    dom = subprocess.run(
        [_chromium(), *flags, "--dump-dom", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
        text=True,
    ).stdout
    assert "optarium report" in dom and "gradpower" in dom
    assert dom.count("<img") == 2
