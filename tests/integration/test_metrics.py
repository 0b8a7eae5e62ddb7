# SPDX-License-Identifier: MIT
"""Metrics that arrive: btguardctl's report, written as the shipped
btguard-metrics.service writes it (--output into a textfile directory),
passes Debian's `promtool check metrics`, and Debian's real
prometheus-node-exporter serves its series with the values written.

A real daemon with a policy guards one process of ours by its rule, and
leaves another at risk; the report selects only processes named by the
test's own token, so other work on the machine does not change the counts.
The exporter listens on a free port of 127.0.0.1 with only the textfile
collector, and is stopped by its PID.
"""

import os
import re
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest

from btg.daemon import running_daemon
from btg.victims import start, victim_path

PROMTOOL = "/usr/bin/promtool"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
INTERVAL = 0.5


def need(path, package):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} missing: install Debian's {package} (tests/install-deps)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(text):
    """{'name{labels}': value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def scrape(port, deadline):
    url = f"http://127.0.0.1:{port}/metrics"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_node_exporter_serves_the_report(tmp_path, victim, fake_torch):
    need(PROMTOOL, "prometheus")
    need(NODE_EXPORTER, "prometheus-node-exporter")
    c10, greenlet = fake_torch
    token = "btgmet" + uuid.uuid4().hex[:12]
    os.chmod(tmp_path, 0o755)
    conf = tmp_path / "btguardd.conf"
    conf.write_text(f"[watch]\ninterval = {int(INTERVAL * 1000)}ms\n\n"
                    f"[rule torch]\naction = guard\nat-risk = yes\ncmdline = *{token}-g*\n")
    for name in (f"{token}-g", f"{token}-r"):
        (tmp_path / name).symlink_to(victim_path("idle"))
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    report = textfiles / "btguard.prom"
    env = {"LD_PRELOAD": f"{c10}:{greenlet}"}

    with running_daemon(args=("--config", str(conf))) as d:
        guarded = start(victim, [tmp_path / f"{token}-g", 1], "idle", env=env)
        start(victim, [tmp_path / f"{token}-r", 1], "idle", env=env)
        deadline = time.monotonic() + 10
        while d.ctl("status", guarded.pid).results[0]["state"] != "guarded":
            assert time.monotonic() < deadline, d.log()[-3000:]
            time.sleep(0.1)
        # What btguard-metrics.service runs, but for the selector.
        r = d.ctl("status", "--cmdline", f"*{token}*", "--format=prometheus",
                  "--output", report, json=False, check=4)
        assert r.stdout == "" and sorted(os.listdir(textfiles)) == ["btguard.prom"]
    text = report.read_text()
    assert oct(report.stat().st_mode & 0o777) == "0o644"   # the exporter's user reads it

    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr

    written = samples(text)
    assert written['btguard_processes{state="guarded"}'] == 1, text
    assert written['btguard_processes{state="unguarded"}'] == 1, text
    assert written["btguard_processes_at_risk"] == 1, text
    assert written["btguard_processes_covered"] == 1, text
    assert written['btguard_rule_guards_total{rule="torch"}'] >= 1, text
    assert abs(written["btguard_report_timestamp_seconds"] - time.time()) < 120, text
    # The policy sweeps every half second: its last sweep is recent.
    assert abs(written["btguard_last_sweep_timestamp_seconds"] - time.time()) < 60, text

    port = free_port()
    exporter = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={textfiles}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        served = scrape(port, time.monotonic() + 20)
    finally:
        exporter.terminate()
        try:
            exporter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            exporter.kill()
            exporter.wait()
    got = samples(served)
    assert got.get("node_textfile_scrape_error") == 0, served
    ours = {k: v for k, v in got.items() if k.startswith("btguard_")}
    assert ours == written, served
    # HELP and TYPE arrive too, so Prometheus knows the counter for one.
    assert re.search(r"^# TYPE btguard_rule_guards_total counter$", served, re.M), served
    assert re.search(r"^# TYPE btguard_processes_at_risk gauge$", served, re.M), served
