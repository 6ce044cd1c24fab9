"""Issue 34 §6: every claims file opens with one table — claim, verdict, the deciding number, a
link to the claim's full line — and keeps the full numbers below; the table and the lines agree.
"""
from __future__ import annotations

import glob
import os
import re

import pytest

from dpledger.experiments.claims_table import (_LINE, claims_markdown, decider,
                                               rewrite_claims_file, verdict_of)
from dpledger.experiments.common import Claim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = re.compile(r"^\| (?P<claim>.*) \| \*\*(?P<verdict>.*)\*\* \| (?P<num>.*) \| "
                 r"\[below\]\(#(?P<anchor>claim-\d+)\) \|$")


def _check(text: str, own: tuple = ()) -> int:
    """The file opens (after its title) with the table; every claim line below has its row,
    anchor, verdict and deciding number (``own``: anchors of claims that state their own);
    returns the number of claims."""
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    first = next(ln for ln in lines[1:] if ln.strip())
    assert first == "| claim | verdict | deciding number | numbers |", first
    rows = [ROW.match(ln) for ln in lines if ROW.match(ln)]
    claims = [(i, _LINE.match(ln)) for i, ln in enumerate(lines) if _LINE.match(ln)]
    assert len(rows) == len(claims) > 0
    for row, (i, m) in zip(rows, claims, strict=True):
        assert lines[i - 1] == f'<a id="{row["anchor"]}"></a>'
        assert row["claim"] == m["text"].replace("|", "\\|")
        assert row["verdict"] == verdict_of(m["mark"])
        if row["anchor"] not in own:
            assert row["num"] == decider(m["evidence"]).replace("|", "\\|")
    return len(rows)


def test_an_experiments_claims_open_with_the_table():
    claims = [Claim.judged("A beats B", True, "7/8 cells; fails at x: 1 vs 2"),
              Claim.judged("B | C", False, "regret / bound ≤ 1 in 3/10: " + "a 1, " * 40),
              Claim.missing("D", "policy d not run"),
              Claim.judged("E", True, "2/2", outside="a custom instance"),
              Claim("F", None, "vacuous: nothing to lose", decides="0 of 6 bands")]
    top, full = claims_markdown(claims)
    text = "# T\n\n" + top + "\nFull numbers:\n\n" + full
    assert _check(text, own=("claim-5",)) == 5
    verdicts = [ROW.match(ln)["verdict"] for ln in top.splitlines()[2:]]
    assert verdicts == ["confirmed", "NOT confirmed", "not testable here", "not applicable",
                        "not testable here"]
    nums = [ROW.match(ln)["num"] for ln in top.splitlines()[2:]]
    assert nums[:2] == ["7/8 cells", "regret / bound ≤ 1 in 3/10"]
    assert nums[4] == "0 of 6 bands"                 # a claim's own deciding number wins


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "docs", "*-claims.md"))))
def test_docs_claims_files_open_with_the_table(path):
    """The full-size runs' claims in docs/: the table is there and agrees with the lines, and
    rebuilding it from them changes nothing."""
    text = open(path, encoding="utf-8").read()
    _check(text)
    assert rewrite_claims_file(text) == text


def test_readme_claims_section_is_one_table():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## The papers' claims, checked", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| paper | claim | verdict | deciding number | numbers |"
    for ln in rows[1:]:
        cells = [c.strip() for c in ln.strip("|").split(" | ")]
        assert len(cells) == 5, ln
        assert re.fullmatch(r"\*\*(confirmed|NOT confirmed|not testable here|confirmed by "
                            r"median only)\*\*", cells[2]), cells[2]
        assert re.fullmatch(r"\[claims\]\(docs/[a-z0-9-]+\.md(#[a-z0-9-]+)?\)", cells[4])
        assert os.path.exists(os.path.join(ROOT, cells[4].split("(")[1].split("#")[0].rstrip(")")))


def test_regret_over_bounds_and_the_panels_draw_them(tmp_path):
    """A run's regret ÷ bound: the Lai–Robbins slope recomputed here (Σ Δ_a / kl(μ_a, μ*) ×
    ln T for Bernoulli arms) gives the same ratio; the experiment's panel draws that bound as a
    line besides the policy's own."""
    import json
    import math
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from dpledger.cli import main
    from dpledger.experiments import common
    from dpledger.plots import regret_over_bounds
    means, T = [0.7, 0.5, 0.4], 2000
    assert main(["run", "ucb1", "--means", ",".join(map(str, means)), "--horizon", str(T),
                 "--runs", "2", "--quiet", "--out", str(tmp_path / "r.json")]) == 0
    rep = json.loads((tmp_path / "r.json").read_text())

    def kl(p, q):
        return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    slope = sum((0.7 - m) / kl(m, 0.7) for m in means[1:])
    got = {b.key: (v, r) for b, v, r in regret_over_bounds(rep)}
    v, r = got["lai-robbins-1985"]
    assert math.isclose(v, slope * math.log(T), rel_tol=1e-9)
    assert math.isclose(r, rep["regret"]["final_mean"] / v, rel_tol=1e-12)
    drawn = []
    real = plt.Figure.savefig

    def keep(fig, *a, **k):
        drawn.extend(ln.get_label() for ax in fig.axes for ln in ax.get_lines())
        return real(fig, *a, **k)
    try:
        plt.Figure.savefig = keep
        common.plot_regret_panels({"panel": [("ucb1", rep)]}, str(tmp_path / "p.png"), "t")
    finally:
        plt.Figure.savefig = real
    assert "ucb1" in drawn
    assert any(lab.startswith("Lai & Robbins 1985") for lab in drawn), drawn
