"""Issue 25 §4–§5: what is accepted is reported truly — messages in the user's terms, audits that
say why they stopped, a variant checked against the paper's promise — and plots and tables read
at a glance (bands never below zero, legends off the data, the audit's bound panel at the
certificate's scale, coinciding curves named, 80 columns)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.errors import DpledgerError


def _main(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ---- §4: the Python API validates as the CLI does ---------------------------------------------

def test_composition_built_directly_is_checked():
    """A count of −1 gave ε = −1; a non-release or a non-pair is refused too."""
    from dpledger.accounting.composition import Composition
    from dpledger.accounting.releases import LaplaceRelease
    lap = LaplaceRelease(scale=1.0)
    for items, fragment in [(((lap, -1),), "count must be >= 1"), (((lap, 1.5),), "integer"),
                            (((object(), 1),), "not a release"), ((lap,), "(release, count)"),
                            ([(lap, 1)], "tuple")]:
        with pytest.raises(DpledgerError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            Composition(items)
    assert Composition(((lap, 2),)).pure_epsilon() == 2.0


def test_make_policy_refuses_text_where_a_number_is_declared():
    from dpledger.policies.registry import make_policy, make_policy_from_text
    with pytest.raises(DpledgerError, match="epsilon must be a number, got '0.5'"):
        make_policy("dp-ucb", epsilon="0.5")
    with pytest.raises(DpledgerError, match="must be true or false"):
        make_policy("klucb", threshold_test="yes")
    assert make_policy_from_text("dp-ucb", {"epsilon": "0.5"}).params["epsilon"] == 0.5
    assert make_policy_from_text("dp-ucb", {"eps": "0.5"}).params["epsilon"] == 0.5
    assert make_policy_from_text("klucb", {"threshold_test": "false"}).params[
        "threshold_test"] is False
    # numpy numbers are numbers, and are shown as Python writes them
    assert make_policy("dp-ucb", epsilon=np.float64(0.5)).params["epsilon"] == 0.5
    with pytest.raises(DpledgerError) as exc:
        make_policy("dp-ucb", epsilon=np.float64(-5.0))
    assert "got -5.0" in str(exc.value) and "np." not in str(exc.value)
    from dpledger.accounting.releases import LaplaceRelease
    with pytest.raises(DpledgerError) as exc:
        LaplaceRelease(scale=np.float64(-1.0))
    assert "got -1.0" in str(exc.value) and "np." not in str(exc.value)


def test_counts_are_singular_or_plural():
    from dpledger.errors import counted
    assert counted(1, "record") == "1 record" and counted(2, "record") == "2 records"
    assert counted(0, "run") == "0 runs" and counted(None, "run") == "None runs"
    assert counted(True, "run") == "True runs"


def test_flag_terms_replace_api_names():
    from dpledger.inputs import in_flag_terms
    msg = str(in_flag_terms(DpledgerError("stop_at must lie in [3, 9]; pass a larger stop_at, "
                                          "not --stop-at or my_stop_at")))
    assert msg == ("--stop-at must lie in [3, 9]; pass a larger --stop-at, not --stop-at or "
                   "my_stop_at")


# ---- §4: what is reported -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def lazy_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    assert main(["run", "lazy-dp-ts", "--horizon", "300", "--runs", "2", "--quiet", "--out",
                 str(d / "run.json")]) == 0
    return d


def test_verify_ratio_agrees_with_the_numbers_it_prints(lazy_run, capsys):
    """An edited certificate: the printed ratio is the printed certificate over the printed
    theorem (the stored ratio, left unedited, would say 1)."""
    rep = json.loads((lazy_run / "run.json").read_text())
    rep["privacy"]["certificate"]["pure_epsilon"] = 0.25
    edited = lazy_run / "edited.json"
    edited.write_text(json.dumps(rep))
    code, out, err = _main(capsys, "verify", str(edited))
    assert code == 1 and "privacy.certificate.pure_epsilon: stored 0.25, recomputed 1" in err
    line = next(x for x in out.splitlines() if x.startswith("pure_epsilon as stored"))
    assert "certificate 0.25, theorem 1, certificate/theorem = 0.25" in line


def test_renoise_variant_is_checked_against_the_papers_promise(tmp_path, capsys):
    """dp-klucb mechanism=renoise-cumulative is its own theorem; the output says it breaks the
    paper's ε, by how much, and verify agrees; the paper's mechanism carries no such line."""
    out_json = tmp_path / "renoise.json"
    code, out, _ = _main(capsys, "run", "dp-klucb", "--set", "mechanism=renoise-cumulative",
                         "--horizon", "1000", "--runs", "1", "--out", str(out_json))
    assert code == 0
    assert "breaks the paper's promise: certificate pure ε 16, 16 times the pure ε = 1" in out
    rep = json.loads(out_json.read_text())
    chk = rep["privacy"]["checks"]
    assert chk["promise_kept"] is False and rep["privacy"]["theorem"]["promise"]["pure_epsilon"] == 1
    code, out, _ = _main(capsys, "verify", str(out_json))
    assert code == 0 and "finding about the variant" in out
    code, out, _ = _main(capsys, "run", "dp-klucb", "--horizon", "1000", "--runs", "1", "--out",
                         str(tmp_path / "paper.json"))
    assert code == 0 and "promise" not in out


def test_audit_says_why_it_stopped_and_shows_the_limit(tmp_path, capsys):
    code, out, _ = _main(capsys, "audit", "lazy-dp-ts", "--trials", "2000", "--until-ratio",
                         "0.9", "--max-trials", "8000", "--seed", "0",
                         "--out", str(tmp_path / "a.json"))
    assert code == 0
    seq = json.loads((tmp_path / "a.json").read_text())["sequential"]
    line = next(x for x in out.splitlines() if x.startswith("sequential: stopped"))
    assert f"(stop_reason {seq['stop_reason']})" in line
    assert seq["stop_reason"] == "cannot_reach" and "could no longer reach 0.9 ×" in line
    code, out, _ = _main(capsys, "audit", "dp-ucb", "--trials", "500", "--out",
                         str(tmp_path / "b.json"))
    assert code == 0
    assert "note: the actions reveal less than the releases here: each decision compares" in out
    # a zero bound in black-box mode suggests white-box; in white-box mode it does not
    assert "so can --mode whitebox" in out


def test_whitebox_note_and_best_possible_wording(tmp_path, capsys):
    code, out, _ = _main(capsys, "audit", "lazy-dp-ts", "--mode", "whitebox", "--trials", "20",
                         "--horizon", "100", "--out", str(tmp_path / "w.json"))
    assert code == 0 and "a lower bound of 0" in out            # 20 trials: no power
    assert "--mode whitebox" not in out and "so can a --pair of your own" in out
    code, out, _ = _main(capsys, "audit", "dp-ucb", "--mode", "whitebox", "--horizon", "3",
                         "--trials", "2000", "--out", str(tmp_path / "x.json"))
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("typical bound of the best test"))
    assert "may fall above or below it" in line and "no audit of this n can exceed it" in line


# ---- §5: plots and tables -----------------------------------------------------------------------

@pytest.fixture
def saved(monkeypatch):
    """The figures the plot functions save (kept open for inspection)."""
    import dpledger.plots as P
    figs = []
    monkeypatch.setattr(P, "_save", lambda fig, path: figs.append(fig))
    monkeypatch.setattr(P, "_plt", _no_close(P._plt))
    return figs


def _no_close(plt_getter):
    def get():
        plt = plt_getter()

        class Keep:
            def __getattr__(self, name):
                return (lambda *a, **k: None) if name == "close" else getattr(plt, name)
        return Keep()
    return get


def _outside(fig, ax) -> bool:
    """The axes' legend lies right of or below its plotting area: it covers no data."""
    fig.canvas.draw()
    leg = ax.get_legend().get_window_extent()
    box = ax.get_window_extent()
    return leg.x0 >= box.x1 or leg.y1 <= box.y0


def test_regret_band_never_below_zero_and_legend_off_the_data(lazy_run, saved):
    from dpledger.plots import plot_regret
    rep = json.loads((lazy_run / "run.json").read_text())
    lo = np.asarray(rep["regret"]["curve"]["lo"])
    rep["regret"]["curve"]["lo"] = list(lo - 5.0)       # a band that dips below 0
    plot_regret([rep], "x.png")
    fig = saved[0]
    ax = fig.axes[0]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() >= 0.0 and (lo - 5.0).min() < 0
    assert "cut at 0" in ax.get_title()
    assert _outside(fig, ax)


def test_tradeoff_error_bars_stop_at_zero(tmp_path, monkeypatch):
    from dpledger.experiments import common
    captured = []
    monkeypatch.setattr(common, "_save", lambda fig, path: captured.append(fig))
    common.plot_tradeoff({"a": [(0.1, 1.0, 3.0), (1.0, 5.0, 2.0)]}, str(tmp_path / "t.png"),
                         "ε", "t", logx=False)
    ax = captured[0].axes[0]
    segs = [s for c in ax.collections for s in c.get_segments()]
    assert min(float(np.min(s[:, 1])) for s in segs) >= 0.0          # 1 − 3 cut at 0
    assert _outside(captured[0], ax)


def test_curve_plot_names_coinciding_lines(lazy_run, saved):
    from dpledger.commands.curve import DEFAULT_GRID, curves
    from dpledger.plots import plot_curve
    rep = json.loads((lazy_run / "run.json").read_text())
    data = curves(rep, "both", DEFAULT_GRID, [1.0])
    plot_curve({n: (DEFAULT_GRID, data[n][0]) for n in data}, "c.png", "t")
    labels = [t.get_text() for t in saved[0].axes[0].get_legend().get_texts()]
    assert "realized: best valid (= certificate: best valid)" in labels
    assert "certificate: best valid" in labels


def test_audit_plot_bound_panel_at_the_certificates_scale(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from dpledger.audits import plots as AP
    from dpledger.audits.mechanisms import audit_spec
    res = audit_spec(["laplace:eps=1"], 20000, seed=1)
    figs = []
    import dpledger.plots as P
    orig = P._save
    try:
        P._save = lambda fig, path: figs.append(fig)      # plot_audit imports it when called
        AP.plot_audit(res, str(tmp_path / "a.png"))
    finally:
        P._save = orig
    ax2 = figs[0].axes[1]
    top = ax2.get_ylim()[1]
    assert res.extra["ceiling"] > 3 * top >= 3 * res.certified      # the ceiling left the panel
    assert top <= 1.3 * max(res.certified, res.lower) + 1e-9
    assert any("off the panel" in t.get_text() for t in ax2.get_legend().get_texts())
    assert all(_outside(figs[0], ax) for ax in figs[0].axes)


def test_experiment_prints_a_short_summary(tmp_path, capsys):
    """The terminal gets the sizes, the claims and where the full table is; the files get the
    table (a 60-row table used to print its first 40 rows)."""
    import types
    from dpledger.experiments.common import Claim, Summary, run_experiment
    from dpledger.sweep import RunConfig
    cfg = RunConfig("ucb", "ucb1", {}, {"kind": "bernoulli", "means": [0.7, 0.5]}, horizon=50,
                    runs=1)
    rows = [{"policy": "ucb1", "row": i, "regret": float(i)} for i in range(60)]
    module = types.SimpleNamespace(
        NAME="fake", TITLE="A fake experiment", configs=lambda quick, overrides=None: [cfg],
        summarize=lambda reports, out, quick, overrides=None: Summary(
            table=rows, plots=[], claims=[Claim("regret is finite", True, "60 rows")]))
    run_experiment(module, str(tmp_path / "x"), quick=True, quiet=False)
    out = capsys.readouterr().out
    assert out.count("\n") <= 4 and "|" not in out
    assert "regret is finite" in out and "full table (60 rows, 3 columns)" in out
    assert (tmp_path / "x" / "table.md").read_text().count("\n") == 62


# ---- the README's first command and the import circle -------------------------------------------

def test_readme_outputs_are_ignored_in_a_checkout():
    """`dpledger run … --out run.json` in the checkout leaves nothing for `git status` to show."""
    import fnmatch
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    patterns = [p.strip().lstrip("/") for p in (root / ".gitignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    readme = (root / "README.md").read_text()
    assert "--out run.json" in readme
    for written in ("run.json", "run.ledger.json", "audit.json", "curve.png", "per-reward.png"):
        assert any(fnmatch.fnmatch(written, p) for p in patterns), written


def test_run_and_verify_do_not_import_each_other():
    """What both need (the ledger file's record, the table loader) lives in dpledger.inputs."""
    import os
    import subprocess
    import sys
    code = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
            "print(sys.argv[2] in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for mod, other in (("dpledger.commands.run", "dpledger.verify"),
                       ("dpledger.verify", "dpledger.commands.run")):
        p = subprocess.run([sys.executable, "-c", code, mod, other], capture_output=True,
                           text=True, env=env)
        assert p.returncode == 0 and p.stdout.strip() == "False", (mod, p.stdout, p.stderr)
