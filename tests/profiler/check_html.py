#!/usr/bin/env python3
"""Loads an htr-prof HTML page in headless Chromium and checks that it
renders: no script errors (the page's own error sink stays empty and the
browser console logs no uncaught error), the script ran (it stamps the status
line with data-drawn), and the timeline is drawn (that many rect.ev elements
in svg#timeline, more than zero), plus the roofline and memory charts exist.

Usage: check_html.py PAGE.html [--expect-fail]
Exit 0 ok, 1 failed, 77 skipped (no chromium on this machine; the reason is
printed). --expect-fail inverts the verdict (used on a deliberately broken
page, so this checker is itself shown to fail).
Stdlib only.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def check(page):
    chrome = find_chromium()
    if chrome is None:
        return None, ["chromium not installed (Debian: apt-get install chromium)"]
    errors = []
    with tempfile.TemporaryDirectory(prefix="htr-chromium-") as profile:
        cmd = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0", "--virtual-time-budget=5000", "--dump-dom",
               "file://" + os.path.abspath(page)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return False, ["chromium timed out"]
    dom, log = r.stdout, r.stderr
    if r.returncode != 0:
        errors.append(f"chromium exited with {r.returncode}: {log[-500:]}")
    for line in log.splitlines():
        if "CONSOLE" in line and re.search(r"Uncaught|Error", line):
            errors.append(f"console: {line.strip()}")
    m = re.search(r'<pre id="errors">(.*?)</pre>', dom, re.S)
    if m is None:
        errors.append("no error sink (pre#errors) in the rendered page")
    elif m.group(1).strip():
        errors.append(f"script errors: {m.group(1).strip()[:300]}")
    m = re.search(r'id="status"[^>]*data-drawn="(\d+)"', dom) or re.search(r'data-drawn="(\d+)"[^>]*id="status"', dom)
    if m is None:
        errors.append("the page's script did not run (no data-drawn on the status line)")
        drawn = -1
    else:
        drawn = int(m.group(1))
    tl = re.search(r'<svg id="timeline".*?</svg>', dom, re.S)
    rects = len(re.findall(r'<rect class="ev"', tl.group(0))) if tl else 0
    if rects == 0:
        errors.append("no timeline events drawn (svg#timeline has no rect.ev)")
    if drawn >= 0 and drawn != rects:
        errors.append(f"script counted {drawn} events, the DOM has {rects}")
    if '<svg id="roofline"' not in dom:
        errors.append("no roofline chart")
    if '<svg id="memory"' not in dom or 'class="mem"' not in dom:
        errors.append("no memory curve")
    if re.search(r'(src|href)="(https?:)?//', dom):
        errors.append("the page references external resources")
    return not errors, errors


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    expect_fail = "--expect-fail" in argv[2:]
    ok, errors = check(argv[1])
    if ok is None:
        print(f"check_html: SKIP: {errors[0]}")
        return 77
    for e in errors:
        print(f"check_html: {e}")
    if expect_fail:
        print(f"check_html: {argv[1]}: {'rejected as expected' if not ok else 'ACCEPTED a broken page'}")
        return 0 if not ok else 1
    print(f"check_html: {argv[1]}: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
