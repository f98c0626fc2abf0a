"""The HTML report: self-contained, lists all methods, shows verdicts and figures, renders in Chromium."""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from optarium._core.registry import all_methods
from optarium.harness.report import METRICS_PER_TABLE, render_report, write_report
from optarium.harness.runner import run_experiment


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    run_experiment("gradpower", "smoke", out=root)
    return root


def test_report_is_self_contained_and_complete(runs_root: Path) -> None:
    text = render_report(runs_root)
    for m in all_methods():
        if m.status == "implemented":
            assert f'<a href="#{m.slug}">{m.slug}</a>' in text and f'id="{m.slug}"' in text, m.slug
        else:
            assert f"<li><code>{m.slug}</code>" in text, m.slug
    assert text.index("id='scoreboard'") < text.index("id='contents'") < text.index("id='overview'")
    sections = ["id='overview'", "id='planned'", 'id="gradpower"']
    order = [text.index(sec) for sec in sections if sec in text]
    assert order == sorted(order) and len(order) >= 2
    # every in-page link has its target (no "Planned methods" link once nothing is planned)
    for target in set(re.findall(r"href=['\"]#([^'\"]+)['\"]", text)):
        assert f"id='{target}'" in text or f'id="{target}"' in text, target
    assert ("id='planned'" in text) == any(m.status != "implemented" for m in all_methods())
    assert "no verdict" in text
    assert "Verdict rule" in text and "Deciding figures" in text
    assert text.count("data:image/png;base64,") == 2
    assert "None" not in re.sub(r"<pre>.*?</pre>", "", text, flags=re.S)  # no "x ± None (1)" cells
    # nothing fetched from the network: no external scripts, styles or images
    assert not re.search(r"<script", text)
    assert not re.search(r"(src|href)=\"https?://", text)


def test_final_values_tables_show_single_seeds_and_never_average_identifiers(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_experiment("gradpower", "smoke", seeds=1, out=root)
    section = render_report(root).split('id="gradpower"')[1].split("<h2")[0]
    cells = re.findall(r"<td class='num'>(.*?)</td>", section.split("Final values")[1])
    assert cells and all("(1 seed)" in c and "&plusmn;" not in c for c in cells), cells[:3]
    heads = re.findall(r"<tr><th>method</th>(.*?)</tr>", section)
    assert heads and all(h.count("<th>") <= METRICS_PER_TABLE for h in heads)


def test_scoreboard_counts_the_recorded_verdicts_per_family(tmp_path: Path) -> None:
    from optarium.harness.recorded import RecordedVerdict, write_recorded

    outcomes = {"tcgp": "not reproduced", "turbo-enn": "reproduced", "pom-mobo": "reproduced"}
    for slug, outcome in outcomes.items():
        write_recorded(RecordedVerdict(slug=slug, scale="full", outcome=outcome, summary="s"), tmp_path / "v")
    text = render_report(tmp_path / "none", tmp_path / "v")
    board = text.split("id='scoreboard'")[1].split("id='contents'")[0]
    bo = next(r for r in board.split("<tr>") if r.startswith("<td class='slug'>bo<"))
    nums = [int(x) for x in re.findall(r">(\d+)</td>", bo)]
    n_impl = sum(m.family == "bo" and m.status == "implemented" for m in all_methods())
    # methods, implemented, quick: R NR I none, full: R NR I none
    assert nums[1] == n_impl and nums[2:6] == [0, 0, 0, n_impl] and nums[6:10] == [2, 1, 0, n_impl - 3]


def test_empty_runs_root_still_lists_methods(tmp_path: Path) -> None:
    text = render_report(tmp_path / "none")
    assert "No runs stored yet" in text
    overview = text.split("id='overview'")[1].split("<h2")[0]
    n_impl = sum(m.status == "implemented" for m in all_methods())
    assert overview.count("<tr>") == n_impl + 1


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
    # laid out at 1280 px, no table is wider than the page and the page needs no horizontal scrolling
    probe = tmp_path / "probe.html"
    probe.write_text(
        report.read_text(encoding="utf-8").replace("</body>", _OVERFLOW_PROBE + "</body>"), encoding="utf-8"
    )
    dom = subprocess.run(
        [_chromium(), *flags, "--window-size=1280,2000", "--dump-dom", probe.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
        text=True,
    ).stdout
    found = re.search(r'<pre id="overflow">(.*?)</pre>', dom, flags=re.S)
    assert found, "the overflow probe did not run"
    result = json.loads(html.unescape(found.group(1)))
    assert result["tables"] >= 4 and result["page"] <= result["viewport"], result
    assert not result["overflowing"], result


# Run only in the test's copy of the report (the report itself has no scripts): measures every table's right
# edge against the viewport and writes the result into the DOM that --dump-dom prints.
_OVERFLOW_PROBE = """<script>
const vw = document.documentElement.clientWidth;
const bad = [...document.querySelectorAll('table')].map((t, i) => [i, t.getBoundingClientRect().right])
  .filter(([i, r]) => r > vw + 0.5).map(([i, r]) => ({table: i, right: r}));
const pre = document.createElement('pre'); pre.id = 'overflow';
pre.textContent = JSON.stringify({viewport: vw, page: document.documentElement.scrollWidth,
  tables: document.querySelectorAll('table').length, overflowing: bad});
document.body.appendChild(pre);
</script>"""
