"""Open a results store's report in headless Chromium and save what it shows as a PNG: the
report page with its trial table filtered and sorted through the page's own JavaScript
(``report.html#filter=...&sort=...``), so a screenshot proves the table works in a real
browser. With ``--filter`` or ``--sort`` the page shows only its title and the trial table
(``&view=trials``), every row that passes the filter; the PNG is cut below the last thing
drawn. Needs Debian's ``chromium`` (``apt-get install chromium``).

    python scripts/report_screenshot.py --results results/quickstart --filter progressive \\
        --sort=-score --out report.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

# What a sandboxed machine with no network needs (the flags Chromium's own headless docs and
# this workplace's notes give): no GPU, no background connections, a throwaway profile.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def page_url(page: Path, filter_text: str = "", sort: str = "", view: str = "") -> str:
    fragment = "&".join(f"{k}={quote(v)}" for k, v in (("filter", filter_text),
                                                        ("sort", sort), ("view", view)) if v)
    return page.resolve().as_uri() + (f"#{fragment}" if fragment else "")


def browse(url: str, *, screenshot: Path | None = None, size: str = "1400,2200") -> str:
    """Load ``url`` in headless Chromium; the DOM after its scripts ran (and a screenshot)."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("no chromium here: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        flags = [*FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
                 "--virtual-time-budget=5000"]
        if screenshot is not None:
            subprocess.run([browser, *flags, f"--screenshot={screenshot}", url], check=True,
                           capture_output=True, timeout=120)
        done = subprocess.run([browser, *flags, "--dump-dom", url], check=True,
                              capture_output=True, text=True, timeout=120)
    return done.stdout


def trim(png: Path, margin: int = 16) -> None:
    """Cut the blank bottom of a screenshot: the window is as tall as the tallest page we
    expect, and a short page (a filtered table) would otherwise be mostly white."""
    from PIL import Image, ImageChops

    with Image.open(png) as image:
        rgb = image.convert("RGB")
    box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, (255, 255, 255))).getbbox()
    if box is not None and box[3] + margin < rgb.height:
        rgb.crop((0, 0, rgb.width, box[3] + margin)).save(png)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True, help="results store folder")
    p.add_argument("--filter", default="", help="words the shown trials contain")
    p.add_argument("--sort", default="", help="a column name, '-name' for descending")
    p.add_argument("--out", default="report.png", help="the PNG to write")
    p.add_argument("--height", type=int, default=2200,
                   help="window height in pixels: the most of the page the PNG can show")
    p.add_argument("--width", type=int, default=1400, help="window width in pixels")
    p.add_argument("--whole-page", action="store_true",
                   help="with --filter/--sort, show the whole page, not only the table")
    args = p.parse_args(argv)
    page = Path(args.results) / "report" / "report.html"
    if not page.is_file():
        from reinit_tune.analysis import report

        report.run(Path(args.results))
    # A filter is about the table: show it at the top of the window. Never let the page
    # scroll to it: headless Chromium then captures a blank window.
    view = ("page" if args.whole_page else "trials") if (args.filter or args.sort) else ""
    shot = Path(args.out).resolve()
    browse(page_url(page, args.filter, args.sort, view), screenshot=shot,
           size=f"{args.width},{args.height}")
    trim(shot)
    print(f"screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
