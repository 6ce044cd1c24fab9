"""Every noise draw of every registered policy against the release its ledger names (issue 12 §1).

For every registered policy and every declared parameter — hidden ones included — set in turn to
a non-default legal value, a short simulation runs entirely in Python (each kernel's
``py_func``, the per-round reference code) with a *recording* generator, and every draw is held
against the ledger the simulator built from that same run:

* Laplace / Gaussian noise drawn by the kernel helpers comes right after the ledger write the
  helper makes (``write_kernel_row`` for a row, ``tree_noise`` for a binary-mechanism record):
  each draw is attributed to that row or tree, which must be in the ledger with a count (rows)
  or ``n_items`` (trees) equal to the number of draws attributed to it, and the draw's scale
  must equal the scale of the release the ledger row names (float equality, no tolerance).
  The exact sampler's lattice draws are checked the same way against the ledger's
  ``DiscreteLaplaceRelease``: the integer scale t = t_num/t_den the discrete Laplace sampler was
  called with, the lattice sensitivity 2^bits, and the statistic's sensitivity.
* Gaussian samples recorded without a row (DP-TS-UCB counts its samples per model and writes
  one row per model later) are matched as a multiset of σ against the ledger's Gaussian rows.
* The exact sampler's discrete Gaussian draws (``lattice_gaussian``, issue 12 §5): DP-TS-UCB's
  matched as a multiset of lattice σ against the ledger's ``DiscreteGaussianRelease`` rows;
  TS-Gaussian's against its posterior-read records (bits > 0): the drawn s equals the s_k the
  accounting derives from the record's (c, bits), the draws per (arm, k) equal the record's
  counts, and the released θ is the recorded draw, (S·2^b + Z)/((k+1)·2^b) for an integer Z.
* Posterior samples (TS-Gaussian, M-TS-Gaussian: ``standard_normal`` scaled in the kernel) are
  checked through the capture path: θ − mean = σ·z with z the recorded standard normal and σ the
  one implied by the ledger's posterior-read record at that prefix length (μ² = Δ²/σ²,
  Δ = 1/(k+1), μ² from ``RewardLedger.posterior_read_rows``), and the draws per (arm, k) equal
  the record's counts.
* The capture path: the witness release (arm 0's first) adds exactly the recorded draw's value to
  its clean statistic, so noise rescaled after the draw (as the old ``noise`` multiplier did:
  ``laplace_noise(...) * mult``) fails even though the scale at the draw is right.
* A draw with no ledger write before it, a ledger row no draw belongs to (other than the
  documented extension rows of a tree item, DP-TS-MT's random-pull batches), or a total different
  from the kernel's ``noise_draws`` fails.  Non-private baselines draw no noise and their ledger
  holds only ``NonPrivateRelease`` rows.

A policy declaring ``exact_sampler`` is also run with ``sampler="exact"``.  Noise drawn by any
sampler this recorder does not know (e.g. a new exact Gaussian sampler) shows up as a count
mismatch against the ledger: register the sampler in ``_RECORDED`` below.

The planted defects of ``planted.py`` must fail the same check.
"""
from __future__ import annotations

import importlib
import sys
from collections import Counter

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from dpledger.accounting.releases import (DiscreteGaussianRelease, DiscreteLaplaceRelease,
                                          GaussianRelease, LaplaceRelease, NonPrivateRelease,
                                          lattice_sigma)
from dpledger.policies import simulator
from dpledger.policies.base import KernelPolicy
from dpledger.policies.environments import bernoulli, table
from dpledger.policies.registry import available, make_policy, policy_class
from dpledger.policies.simulator import simulate

from planted import PlantedHalfNoiseLazyDPTS, noiseless

NAMES = available()

# A configuration in which each policy makes releases within a short run (horizon, arms, params).
BASE = {"dp-se": (3000, 2, {}), "dp-ts-mt": (2000, 3, {"epsilon": 60.0, "random_pulls": 5}),
        # b > 0, so that the pre-pull order (prepull=arm-blocks) changes which rewards the
        # later draws read
        "mts-gaussian": (400, 3, {"b": 3})}
DEFAULT_BASE = (400, 3, {})


def _base(name):
    return BASE.get(name, DEFAULT_BASE)


def _variants(param, current):
    """Non-default legal values of ``param`` different from ``current`` (validated by the
    parameter's own parser)."""
    if param.kind == "bool":
        cands = [not param.default]
    elif param.kind == "choice":
        cands = [c for c in param.choices if c != param.default]
    elif param.name == "random_pulls":
        cands = [3, "printed"]
    elif param.kind == "int":
        cands = [param.default + 2]
    elif param.kind == "fraction":
        cands = [0.25, 0.75]
    elif param.kind == "probability":       # a δ in (0, 1)
        cands = [0.05] if param.default is None else [min(0.5, param.default * 100)]
    else:                                   # positive / float; None means a horizon default
        cands = [0.05] if param.default is None else [param.default * 2.5, param.default + 1.5]
    out = []
    for v in cands:
        v = param.parse(v)
        if v != param.default and v != current and v not in out:
            out.append(v)
    return out[:1] if param.kind not in ("choice",) else out


def _configs():
    for name in NAMES:
        T, K, base = _base(name)
        yield pytest.param(name, dict(base), id=f"{name}-base")
        for p in policy_class(name).params_spec:
            for v in _variants(p, base.get(p.name, p.default)):
                yield pytest.param(name, dict(base, **{p.name: v}), id=f"{name}-{p.name}={v}")


def test_every_declared_parameter_is_varied():
    """The configurations above cover every declared parameter (hidden ones included) of every
    registered policy with at least one non-default legal value."""
    for name in NAMES:
        _, _, base = _base(name)
        for p in policy_class(name).params_spec:
            assert _variants(p, base.get(p.name, p.default)), (name, p.name)


# ---- recording ------------------------------------------------------------------------------

class Recorder:
    """A numpy Generator proxy: records every Laplace / Gaussian draw (and standard normal) in
    order with the ledger writes and lattice draws the patched helpers report; forwards the
    rest (uniforms, Beta, Binomial, tie-breaks)."""

    def __init__(self, rng):
        self._rng = rng
        self.events = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        assert size is None and loc == 0.0
        v = self._rng.laplace(loc, scale)
        self.events.append(("laplace", float(scale), float(v)))
        return v

    def normal(self, loc=0.0, scale=1.0, size=None):
        assert size is None and loc == 0.0
        v = self._rng.normal(loc, scale)
        self.events.append(("normal", float(scale), float(v)))
        return v

    def standard_normal(self, size=None):
        assert size is None
        z = self._rng.standard_normal()
        self.events.append(("z", float(z)))
        return z

    def __getattr__(self, name):
        return getattr(self._rng, name)


_CURRENT: list = [None]


def _recording(kind, fn, fields):
    """``fn`` reporting (kind, the arguments at ``fields``…) before it runs; a lattice draw
    also its value after."""
    def wrapper(*args):
        rec = _CURRENT[0]
        if rec is not None:
            rec.events.append((kind,) + tuple(args[i] if not isinstance(args[i], np.generic)
                                              else args[i].item() for i in fields))
        out = fn(*args)
        if rec is not None and kind in ("lattice", "dgauss"):
            rec.events.append(("value", float(out)))
        return out
    return wrapper


# helper name → (event kind, argument positions recorded); patched in every module that holds it
_RECORDED = {
    "write_kernel_row": ("row", (2, 3, 4, 5, 6)),         # rows, n, arm, start, stop, rid, count
    "tree_noise": ("tree", (5, 6, 9)),                     # … slot, arm, offset, n_items, levels, rid
    "lattice_laplace": ("lattice", (1, 2, 3)),             # rng, scale, sensitivity, bits
    "discrete_laplace_int": ("dlap", (1, 2)),              # rng, t_num, t_den
    "lattice_gaussian": ("dgauss", (2,)),                  # rng, units, s, denom
}


def _patch_python(monkeypatch, policy):
    """Every numba dispatcher in the policy and mechanism modules → its py_func (so the kernels
    run in Python and take the recorder), the recorded helpers wrapped, and the policy's
    kernels wrapped to run their py_func with a full capture array (round × arm samples, for
    the posterior-read policies' σ)."""
    # The simulator is not patched: its compiled segment pass (sink.digest) must be compiled
    # with the real helpers before they are swapped for their py_funcs (a fresh source stamp,
    # e.g. a clean checkout, would otherwise compile it against a Python _store and fail).
    simulator._segments(np.zeros(2, dtype=np.int64), 1, 1)
    mods = [m for n, m in list(sys.modules.items())
            if m is not None and (n.startswith("dpledger.policies.") or n.startswith("dpledger.mechanisms."))
            and n != "dpledger.policies.simulator"]
    mods.append(importlib.import_module(type(policy).__module__))
    for mod in mods:
        for key, val in list(vars(mod).items()):
            if isinstance(val, CPUDispatcher):
                fn = val.py_func
                if key in _RECORDED:
                    kind, fields = _RECORDED[key]
                    fn = _recording(kind, fn, fields)
                monkeypatch.setattr(mod, key, fn)
    captures = []

    def wrap(kern):
        py = kern.py_func

        def run(rng, env, T, K, stop, params, actions, rows, capture, *rest):
            cap = np.full((3, max(stop * K, 4)), np.nan)
            captures.append(cap)
            return py(rng, env, T, K, stop, params, actions, rows, cap, *rest)
        return run

    cls = type(policy)
    monkeypatch.setattr(cls, "kernel", wrap(cls.kernel))
    if cls.segment_kernel is not None:
        monkeypatch.setattr(cls, "segment_kernel", wrap(cls.segment_kernel))
    recorders = []
    orig = simulator.run_generator

    def run_generator(seed, i):
        rec = Recorder(orig(seed, i))
        recorders.append(rec)
        _CURRENT[0] = rec
        return rec

    monkeypatch.setattr(simulator, "run_generator", run_generator)
    return recorders, captures


def recorded_run(monkeypatch, policy, env, T, seed=5, runs=2, sampler="float"):
    with monkeypatch.context() as mp:
        recorders, captures = _patch_python(mp, policy)
        try:
            res = simulate(policy, env, T, seed=seed, runs=runs, sampler=sampler,
                           keep_actions=True)
        finally:
            _CURRENT[0] = None
    assert len(recorders) == runs == len(captures)
    return res, recorders, captures


# ---- the check ------------------------------------------------------------------------------

def _by_run(cols, run):
    m = cols["run"] == run
    return {k: v[m] for k, v in cols.items()}


def _draws(events):
    """(draws attributed to the write before them, unattributed draws, standard normals)."""
    attached, loose, zs = [], [], []
    pending = None
    i = 0
    while i < len(events):
        ev = events[i]
        if ev[0] in ("row", "tree"):
            assert pending is None, f"ledger write {pending} with no draw after it"
            pending = ev
        elif ev[0] in ("laplace", "normal", "lattice"):
            draw = {"kind": ev[0], "scale": ev[1]}
            if ev[0] == "lattice":
                draw.update(sensitivity=ev[2], bits=ev[3])
                assert events[i + 1][0] == "dlap", "lattice draw without its discrete Laplace"
                assert events[i + 2][0] == "value"
                draw["t"] = (events[i + 1][1], events[i + 1][2])
                draw["value"] = events[i + 2][1]
                i += 2
            else:
                draw["value"] = ev[2]
            if pending is None:
                loose.append(draw)
            else:
                attached.append((pending, draw))
                pending = None
        elif ev[0] == "dgauss":            # exact sampler: row-less, like DP-TS-UCB's samples,
            assert events[i + 1][0] == "value"     # or after its row (AdaC-UCB's episode means)
            draw = {"kind": "dgauss", "s": ev[1], "value": events[i + 1][1]}
            if pending is None:
                loose.append(draw)
            else:
                attached.append((pending, draw))
                pending = None
            i += 1
        elif ev[0] == "z":
            zs.append(ev[1])
        elif ev[0] in ("dlap", "value"):
            raise AssertionError("discrete Laplace drawn outside lattice_laplace")
        i += 1
    assert pending is None, f"ledger write {pending} with no draw after it"
    return attached, loose, zs


def _check_scale(draw, ledger_rel, declared, where):
    if draw["kind"] == "laplace":
        assert isinstance(ledger_rel, LaplaceRelease), (where, ledger_rel)
        assert draw["scale"] == ledger_rel.scale, \
            f"{where}: drew Laplace scale {draw['scale']!r}, the ledger's release has {ledger_rel.scale!r}"
    elif draw["kind"] == "dgauss":          # the release's lattice σ, from the declared σ/Δ
        assert isinstance(ledger_rel, DiscreteGaussianRelease), (where, ledger_rel)
        assert draw["s"] == ledger_rel.sigma, \
            f"{where}: drew discrete Gaussian s {draw['s']!r}, the ledger's has {ledger_rel.sigma!r}"
        bits = int(ledger_rel.sensitivity).bit_length() - 1
        assert draw["s"] == lattice_sigma(declared.sigma / declared.sensitivity, bits), where
    elif draw["kind"] == "normal":
        assert isinstance(ledger_rel, GaussianRelease), (where, ledger_rel)
        assert draw["scale"] == ledger_rel.sigma, \
            f"{where}: drew Gaussian scale {draw['scale']!r}, the ledger's release has σ {ledger_rel.sigma!r}"
    else:
        assert isinstance(ledger_rel, DiscreteLaplaceRelease), (where, ledger_rel)
        t_num, t_den = draw["t"]
        assert t_num / t_den == ledger_rel.scale, \
            f"{where}: drew lattice scale {t_num}/{t_den}, the ledger's release has {ledger_rel.scale!r}"
        assert ledger_rel.sensitivity == 2 ** draw["bits"], (where, ledger_rel)
        # the statistic's step: sensitivity·2^-bits; the declared (float) release says which
        assert isinstance(declared, LaplaceRelease), (where, declared)
        assert draw["sensitivity"] == declared.sensitivity and draw["scale"] == declared.scale, \
            f"{where}: lattice draw of ({draw['scale']!r}, {draw['sensitivity']!r}), declared {declared}"


def check_draws(policy, res, recorders, captures, T, K):
    """Every recorded draw of every run of ``res`` against its ledger (module docstring)."""
    ledger = res.ledger
    declared = policy.releases(T, K)
    kernel_rel = simulator.kernel_releases(policy, res.env, T, K)
    rows_all, trees_all = ledger.rows, ledger.trees
    reads = ledger.posterior_read_rows() if ledger.posterior_reads["run"].size else None
    assert ledger.gaussian_rows["run"].size == 0, "growing-prefix rows: extend this check"
    total = 0
    for j, run in enumerate(res.run_indices):
        attached, loose, zs = _draws(recorders[j].events)
        n_draws = len(attached) + len(loose) + len(zs)
        assert n_draws == res.noise_draws[j], \
            f"run {run}: {n_draws} draws recorded, the kernel reports {res.noise_draws[j]}"
        total += n_draws
        rows, trees = _by_run(rows_all, run), _by_run(trees_all, run)
        row_at = {(int(a), int(s), int(e)): (int(r), int(c)) for a, s, e, r, c in
                  zip(rows["arm"], rows["start"], rows["stop"], rows["release_id"], rows["count"],
                      strict=True)}
        assert len(row_at) == rows["arm"].size, "two ledger rows over one range"
        tree_at = {(int(a), int(o)): (int(r), int(n)) for a, o, r, n in
                   zip(trees["arm"], trees["offset"], trees["release_id"], trees["n_items"],
                       strict=True)}
        hits = Counter()
        for ev, draw in attached:
            if ev[0] == "row":
                arm, start, stop, rid, count = ev[1:]
                key = ("row", arm, start, stop)
                assert (arm, start, stop) in row_at, f"run {run}: drew for {key}, no such ledger row"
                lid, _ = row_at[(arm, start, stop)]
            else:
                arm, offset, rid = ev[1:]
                key = ("tree", arm, offset)
                assert (arm, offset) in tree_at, f"run {run}: drew for {key}, no such ledger tree"
                lid, _ = tree_at[(arm, offset)]
            assert ledger.releases[lid] == kernel_rel[rid], (key, ledger.releases[lid], rid)
            _check_scale(draw, ledger.releases[lid], declared[rid], f"run {run} {key}")
            hits[key] += 1
        # count: every ledger row / tree holds exactly the draws attributed to it
        for (arm, start, stop), (lid, count) in row_at.items():
            rel = ledger.releases[lid]
            got = hits[("row", arm, start, stop)]
            if isinstance(rel, NonPrivateRelease):
                assert got == 0
            elif isinstance(rel, (GaussianRelease, DiscreteGaussianRelease)) and got == 0:
                continue                     # matched with the loose Gaussian draws below
            elif got == 0 and tree_at.get((arm, stop), (None,))[0] == lid:
                continue                     # an item's extension rows (DP-TS-MT random pulls)
            else:
                assert got == count, f"run {run}: row {(arm, start, stop)} counts {count} " \
                                     f"releases of {rel}, {got} drawn"
        for (arm, offset), (_lid, n_items) in tree_at.items():
            assert hits[("tree", arm, offset)] == n_items, (run, arm, offset, n_items)
        # loose draws: only Gaussian samples counted per model, matched as a multiset of σ
        assert all(d["kind"] in ("normal", "dgauss") for d in loose), \
            f"run {run}: noise drawn with no ledger write before it: {loose[:3]}"
        dg = [d for d in loose if d["kind"] == "dgauss"]
        loose = [d for d in loose if d["kind"] == "normal"]
        want, want_dg = Counter(), Counter()
        for (arm, start, stop), (lid, count) in row_at.items():
            rel = ledger.releases[lid]
            if isinstance(rel, GaussianRelease) and hits[("row", arm, start, stop)] == 0:
                want[rel.sigma] += count
            if isinstance(rel, DiscreteGaussianRelease) and hits[("row", arm, start, stop)] == 0:
                want_dg[rel.sigma] += count
        assert Counter(d["scale"] for d in loose) == want, f"run {run}: Gaussian samples"
        if dg and ledger.posterior_reads["run"].size:
            _check_posterior_exact(res, run, j, dg, captures[j], reads, K)
        else:
            assert Counter(float(d["s"]) for d in dg) == want_dg, \
                f"run {run}: discrete Gaussian samples"
        # posterior samples (standard normals scaled in the kernel): the capture path
        if zs:
            _check_posterior(res, run, j, zs, captures[j], reads, K)
        elif dg:        # exact Gaussian: the draw returns the release itself (arm 0's is first)
            assert np.isnan(captures[j][0, 0]) or captures[j][0, 0] == dg[0]["value"], run
        else:
            _check_witness(run, captures[j], attached, loose)
    return total


def _check_witness(run, cap, attached, loose):
    """The capture path: the witness release (arm 0's first release) adds to its clean
    statistic exactly the value the recorded draw returned — noise rescaled or replaced after
    the draw (which the scale at the draw cannot show) fails here."""
    released, clean = cap[0, 0], cap[1, 0]
    if np.isnan(released):
        return                               # no witness release in this run
    first = [d for ev, d in attached if ev[1] == 0][:1] or loose[:1]
    assert first, f"run {run}: a witness release was captured but no noise drawn"
    if first[0]["kind"] == "dgauss":        # the exact draw returns the release itself
        assert released == first[0]["value"], (run, released, first[0])
        return
    tol = 4 * np.spacing(max(abs(released), abs(clean), 1.0))
    assert abs((released - clean) - first[0]["value"]) <= tol, \
        f"run {run}: the witness release added {released - clean!r}, its draw was " \
        f"{first[0]['value']!r}"


def _check_posterior_exact(res, run, j, dg, cap, reads, K):
    """TS-Gaussian's exact draws against its discrete posterior-read records (module
    docstring): per sample the lattice σ the accounting derives, the release built from the
    recorded integer draw, and the draws per (arm, k)."""
    from dpledger.accounting.posterior_reads import (posterior_read_lattice_sigma,
                                                     posterior_read_weight)
    led = res.ledger.posterior_reads
    actions = np.asarray(res.actions[j], dtype=np.int64)
    T = actions.size
    theta, mean = cap[0, :T * K].reshape(T, K), cap[1, :T * K].reshape(T, K)
    sampled = ~np.isnan(theta[:, 0])
    assert int(sampled.sum()) * K == len(dg), "one discrete Gaussian per arm per sampling round"
    rec = {int(a): (float(c), int(b)) for r, a, c, b in
           zip(led["run"], led["arm"], led["c"], led["bits"], strict=True) if r == run}
    m = reads["run"] == run
    want = {(int(a), int(kk)): (int(c), float(w)) for a, kk, c, w in
            zip(reads["arm"][m], reads["stop"][m], reads["count"][m], reads["mu2"][m], strict=True)}
    k = np.zeros(K, np.int64)
    got = Counter()
    di = 0
    for t in range(T):
        if sampled[t]:
            for a in range(K):
                d = dg[di]
                di += 1
                c, bits = rec[a]
                assert bits > 0
                assert d["s"] == posterior_read_lattice_sigma(float(k[a]), c, bits), (run, t, a)
                assert cap[2, t * K + a] == d["s"]
                den = (k[a] + 1.0) * 2.0 ** bits
                units = round(mean[t, a] * den)          # S·2^b, an integer
                z = round(d["value"] * den) - units      # the integer discrete Gaussian draw
                assert theta[t, a] == d["value"], (run, t, a)
                assert (units + z) / den == theta[t, a], (run, t, a)   # on the lattice of k
                if k[a] == 0:
                    continue                 # reads no reward: no record
                assert want[(a, int(k[a]))][1] == posterior_read_weight(float(k[a]), c, bits)
                got[(a, int(k[a]))] += 1
        k[actions[t]] += 1
    assert got == Counter({key: c for key, (c, _) in want.items()}), "reads per prefix"


def _check_posterior(res, run, j, zs, cap, reads, K):
    actions = np.asarray(res.actions[j], dtype=np.int64)
    T = actions.size
    theta, mean = cap[0, :T * K].reshape(T, K), cap[1, :T * K].reshape(T, K)
    sampled = ~np.isnan(theta[:, 0])
    assert int(sampled.sum()) * K == len(zs), "one standard normal per arm per sampling round"
    k = np.zeros(K, np.int64)
    got = Counter()
    want_mu2 = {}
    m = reads["run"] == run
    for a, kk, c, mu2 in zip(reads["arm"][m], reads["stop"][m], reads["count"][m], reads["mu2"][m],
                             strict=True):
        want_mu2[(int(a), int(kk))] = (int(c), float(mu2))
    zi = 0
    for t in range(T):
        if sampled[t]:
            for a in range(K):
                z = zs[zi]
                zi += 1
                if k[a] == 0:
                    continue                 # reads no reward: no record
                count, mu2 = want_mu2[(a, int(k[a]))]
                sigma = (1.0 / (k[a] + 1.0)) / np.sqrt(mu2)
                noise = theta[t, a] - mean[t, a]
                assert abs(noise - sigma * z) <= 1e-14 * max(1.0, abs(theta[t, a])), \
                    (run, t, a, noise, sigma * z)
                got[(a, int(k[a]))] += 1
        k[actions[t]] += 1
    assert got == Counter({key: c for key, (c, _) in want_mu2.items()}), "reads per prefix"


# ---- the property over every registered policy ------------------------------------------------

def _env(K):
    return bernoulli([0.9, 0.4, 0.6, 0.5][:K])


@pytest.mark.parametrize("name,params", list(_configs()))
def test_every_draw_matches_its_ledger_release(name, params, monkeypatch):
    T, K, _ = _base(name)
    pol = make_policy(name, **params)
    samplers = ["float", "exact"] if pol.exact_sampler else ["float"]
    for sampler in samplers:
        res, recs, caps = recorded_run(monkeypatch, pol, _env(K), T, sampler=sampler,
                                       runs=2 if sampler == "float" else 1)
        total = check_draws(pol, res, recs, caps, T, K)
        if not pol.private:
            assert total == 0
            assert all(isinstance(r, NonPrivateRelease) for r in res.ledger.releases)
            assert res.ledger.trees["run"].size == 0 and res.ledger.posterior_reads["run"].size == 0
        elif params == _base(name)[2]:
            assert total > 0, f"{name}: the base configuration makes no release in {T} rounds"


SPEED_SWITCHES = [(n, p.name) for n in NAMES for p in policy_class(n).params_spec
                  if p.hidden]


@pytest.mark.parametrize("name,switch", SPEED_SWITCHES)
def test_hidden_switches_draw_identically(name, switch, monkeypatch):
    """Hidden switches (``fast``, ``threshold_test``) change how a run is computed, never what
    is drawn: on a fixed reward table (the same random stream) the noise draws, their values
    and the ledger writes before them are identical, event by event, and so are the actions."""
    T, K, base = _base(name)
    tab = np.random.default_rng(3).random((T, K)) * 0.5 + np.arange(K) * 0.1
    env = table(tab)
    spec = {p.name: p for p in policy_class(name).params_spec}
    flipped = dict(base, **{switch: not spec[switch].default})
    ra, reca, _ = recorded_run(monkeypatch, make_policy(name, **base), env, T, runs=1)
    rb, recb, _ = recorded_run(monkeypatch, make_policy(name, **flipped), env, T, runs=1)
    assert reca[0].events == recb[0].events
    np.testing.assert_array_equal(ra.actions[0], rb.actions[0])
    # a private policy draws noise (Laplace, or Gaussian: adac-ucb), a non-private one none
    assert any(e[0] in ("laplace", "normal") for e in reca[0].events) \
        == make_policy(name).private


def test_every_kernel_policy_draws_the_declared_scales():
    """No registered policy overrides ``noise_scales``: each Laplace kernel draws the scales
    read off its own ``releases`` (and so the parameters that change a draw change a release)."""
    for name in NAMES:
        cls = policy_class(name)
        if issubclass(cls, KernelPolicy):
            assert cls.noise_scales is KernelPolicy.noise_scales, name


# ---- the planted defects are caught ------------------------------------------------------------

def test_planted_half_noise_fails_the_per_draw_check(monkeypatch):
    pol = PlantedHalfNoiseLazyDPTS(epsilon=0.7)
    assert pol.releases(400, 3) == make_policy("lazy-dp-ts", epsilon=0.7).releases(400, 3)
    res, recs, caps = recorded_run(monkeypatch, pol, _env(3), 400)
    with pytest.raises(AssertionError, match="drew Laplace scale"):
        check_draws(pol, res, recs, caps, 400, 3)
    res, recs, caps = recorded_run(monkeypatch, pol, _env(3), 400, sampler="exact", runs=1)
    with pytest.raises(AssertionError, match="lattice"):
        check_draws(pol, res, recs, caps, 400, 3)


@pytest.mark.parametrize("name", ["dp-se", "adap-ucb", "dp-ts", "dp-ucb", "dp-ts-mt"])
def test_planted_noiseless_fails_the_per_draw_check(name, monkeypatch):
    T, K, base = _base(name)
    pol = noiseless(name, **base)
    res, recs, caps = recorded_run(monkeypatch, pol, _env(K), T, runs=1)
    with pytest.raises(AssertionError, match="drew Laplace scale 0.0"):
        check_draws(pol, res, recs, caps, T, K)


def test_unrecorded_noise_fails_the_per_draw_check(monkeypatch):
    """A draw that writes no ledger record (here: the kernel's noise helper adds a second,
    bare ``rng.laplace`` of the right scale for arm 1) is caught as noise without a ledger
    write."""
    from dpledger.mechanisms import noise as noise_mod
    pol = make_policy("lazy-dp-ts")
    with monkeypatch.context() as mp:
        real = noise_mod.laplace_noise.py_func

        def sloppy(rng, env, scale, sensitivity, rows, n, arm, start, stop, release_id):
            extra = rng.laplace(0.0, scale) if arm == 1 else 0.0     # no row for this one
            return real(rng, env, scale, sensitivity, rows, n, arm, start, stop, release_id) + extra

        import dpledger.policies.hu_hegde as hh
        recorders, captures = _patch_python(mp, pol)
        mp.setattr(hh, "laplace_noise", sloppy)
        try:
            res = simulate(pol, _env(3), 400, seed=5, runs=1, keep_actions=True)
        finally:
            _CURRENT[0] = None
    with pytest.raises(AssertionError, match="draws recorded"):
        check_draws(pol, res, recorders, captures, 400, 3)


def test_planted_defect_is_not_reachable_publicly(tmp_path):
    """The planted classes exist only in tests/: no name, parameter or import of dpledger
    reaches them (a fresh interpreter, every registered policy imported)."""
    import subprocess
    code = ("import dpledger\n"
            "from dpledger.policies.registry import available, policy_class\n"
            "from dpledger.policies.base import Policy\n"
            "names = available(); [policy_class(n) for n in names]\n"
            "seen, todo = set(), [Policy]\n"
            "while todo:\n"
            "    c = todo.pop(); seen.add(c); todo += [s for s in c.__subclasses__() if s not in seen]\n"
            "print(sorted(c.__module__ + '.' + c.__qualname__ for c in seen))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "planted" not in out.stdout.lower() and "Noiseless" not in out.stdout
    assert all(m.startswith("'dpledger.") for m in out.stdout.strip("[]\n").split(", "))
    from dpledger.errors import DpledgerError
    with pytest.raises(DpledgerError):
        make_policy(PlantedHalfNoiseLazyDPTS.name)
    cli = subprocess.run([sys.executable, "-m", "dpledger", "run", PlantedHalfNoiseLazyDPTS.name,
                          "--horizon", "100", "--out", str(tmp_path / "p.json")],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "unknown policy" in cli.stderr and "Traceback" not in cli.stderr


@pytest.mark.audit_violations_expected(reason="the planted half-noise defect, white-box")
def test_planted_half_noise_caught_by_whitebox_audit():
    """White-box audit (default pair, K = 2, T = 1000, seed 11, 20 000 trials per side,
    confidence 0.95): the planted policy (declares ε = 0.5, draws Lap(1/(2·0.5)), true ε = 1)
    gets ε_lower above its certificate; the honest policy on the same seed does not."""
    from dpledger.audits.policy import audit_policy
    bad = audit_policy(PlantedHalfNoiseLazyDPTS(epsilon=0.5), trials=20_000, mode="whitebox",
                       seed=11, confidence=0.95)
    assert bad.to_json()["certificate"]["pure_epsilon"] == 0.5
    assert bad.epsilon_lower > 0.5 and bad.violation is True
    ok = audit_policy(make_policy("lazy-dp-ts", epsilon=0.5), trials=20_000, mode="whitebox",
                      seed=11, confidence=0.95)
    assert ok.epsilon_lower <= 0.5 and ok.violation is False
