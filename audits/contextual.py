"""Audits of the private contextual policies on a neighbouring pair of contextual streams
(two full-information tables that differ in their first record).

**The pair** (:func:`contextual_pair`): a ``contextual-table`` with one context per arm (a
shared θ), K = 2 arms, contexts of norm ≤ L = 1 and rewards in [0, 1].

* *White-box*: both arms hold the same context and the same reward in every row, so the
  record a round delivers does not depend on the arm played: the records are a fixed
  sequence, and the clean node sums of D and D′ differ exactly by the change δ of the first
  record's item (in every node that holds it).  Rows 2 … T are fixed pseudo-random filler
  (seeded).  The first record, per statistic (the policy's tree item, :mod:`~dpledger.policies.
  contextual.private_loop`):

  - Shariff & Sheffet's joint statistic (``jdp-linucb``), Gaussian mode: [x; y] = (1, 0, …, 1) on
    D and (−1, 0, …, 1) on D′ (L = 1) — orthogonal, both of norm L̃ = √2, so ‖v vᵀ − w wᵀ‖_F = √2·L̃²,
    the Frobenius sensitivity the certificate uses: the worst case, attained;
    Wishart mode: v = (L·(1, …, 1)/√d, 1) on D against the zero record on D′
    (:mod:`dpledger.audits.vector_releases` gives this pair's exact per-node profile);
  - Mishra & Thakurta's per-entry statistic (``dp-linucb-mt``, ``dp-lints-mt``): the record
    change maximising Σ_e |δ_e|/b_e over a grid (:func:`entries_pair`).  No change attains the
    certificate, which charges every entry its own worst case: Σ_i |x_i² − x′_i²| ≤ 2L²
    (d ≥ 2), Σ_{i<j} |x_i x_j − x′_i x′_j| ≤ (d − 1)·L² and Σ_i |r x_i − r′ x′_i| ≤ 2√d·L, so a
    record's loss over its nodes is at most ε₀·(2 + (d − 1) + √d) against the certificate's
    ε₀·(d(d+1)/2 + d) (:func:`entries_limit`, the ``limit_reason``);
  - the reward-private statistic (``reward-dp-linucb``): the same context x = L·(1, …, 1)/√d,
    reward 1 on D and 0 on D′ — ‖δ‖₂ = L, the worst case.

  The auditor captures every node the first record enters (pushes t = 1, 2, 4, …, the
  released p-sum = its clean sum + noise), subtracts the clean sums it computes itself from
  D's table, and scores the log-likelihood ratio of all of them under the node's noise law
  (:func:`node_llr`) — the Neyman–Pearson statistic of the whole captured vector.  The
  certificate's composition is over exactly these nodes (bit_length(T) of them), so for the
  Gaussian policies the audit can reach it.

* *Black-box*: arm 0's context is L·e₀ and arm 1's L·e₁ in every row; rewards are 0 except
  row 1, (1, 0) on D and (0, 1) on D′.  The first record says which arm paid; the score is
  the pulls of arm 0 in rounds 2 … T (the actions of the *other* rounds, the joint-DP view:
  Hsu et al. 2014's billboard lemma).  Round 1's own action is drawn before its reward and
  has the same law on both sides.

Trials: side s, chunk c of :data:`CHUNK` trials draws from ``PCG64(SeedSequence(seed,
spawn_key=(s, c)))`` (:func:`~dpledger.audits.policy.chunk_generator`), one Generator per
chunk, the trials of a chunk in order: the same seed gives the same audit.  Only the float
sampler is audited (the lattice forms round the items first).
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.audits.result import AuditResult, certificate_summary, currency_of, GDP_DELTA
from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION,
                                   audit_scores, ceiling)
from dpledger.errors import DpledgerError, check_count

CHUNK = 1024
DEFAULT_T = 8
DEFAULT_BLACKBOX_T = 64
DEFAULT_DIM = 2
NORM_BOUND = 1.0
LOG_FLOOR = -1e6          # a Wishart node whose shifted output is not positive definite: the
                          # likelihood on that side is 0 (its log −∞), scored at this floor


def _packed(M: np.ndarray) -> np.ndarray:
    return np.concatenate([M[i, i:] for i in range(M.shape[0])])


def item_of(stat: int, x: np.ndarray, r: float) -> np.ndarray:
    """The tree item of record (x, r) in the policy's layout (one block): the joint statistic's
    packed [x; r][x; r]ᵀ, the per-entry statistic's packed x xᵀ then r·x, or r·x."""
    from dpledger.policies.contextual.private_loop import STAT_ENTRIES, STAT_JOINT
    x = np.asarray(x, dtype=np.float64)
    if stat == STAT_JOINT:
        v = np.r_[x, r]
        return _packed(np.outer(v, v))
    if stat == STAT_ENTRIES:
        return np.r_[_packed(np.outer(x, x)), r * x]
    return r * x


def entries_pair(d: int, L: float = NORM_BOUND, grid: int = 48):
    """((x, r), (x′, r′)) maximising Σ_e |δ_e|/s_e for the per-entry statistic, s_e its entry's
    sensitivity (L² diagonal and off-diagonal with one model, 2L for Σ r·x): x and x′ of norm
    L in the plane of the first two coordinates (or ±L when d = 1) or zero, r, r′ ∈ {0, 1}, on
    an angle grid — the best change this search finds (:func:`entries_limit` bounds every
    change)."""
    from dpledger.policies.contextual.private_loop import STAT_ENTRIES
    sens = np.r_[np.full(d * (d + 1) // 2, L * L), np.full(d, 2.0 * L)]
    if d == 1:
        cands = [np.array([v]) for v in np.linspace(-L, L, 4 * grid + 1)]
    else:
        cands = [np.zeros(d)]
        for a in np.linspace(0.0, 2.0 * math.pi, grid, endpoint=False):
            c = np.zeros(d)
            c[0], c[1] = L * math.cos(a), L * math.sin(a)
            cands.append(c)
    best, arg = -1.0, None
    items = [(x, r, item_of(STAT_ENTRIES, x, r)) for x in cands for r in (0.0, 1.0)]
    for x0, r0, i0 in items:
        for x1, r1, i1 in items:
            v = float(np.sum(np.abs(i1 - i0) / sens))
            if v > best + 1e-12:
                best, arg = v, ((x0, r0), (x1, r1))
    return arg, best


def entries_limit(d: int) -> float:
    """An upper bound, in units of ε₀ per node, on Σ_e |δ_e|/s_e over every change of one
    record (module docstring): min(certificate, c_diag + (d − 1) + √d), c_diag = 2 for d ≥ 2,
    1 for d = 1 (|x² − x′²| ≤ L²)."""
    cert = d * (d + 1) / 2 + d
    return min(cert, (2.0 if d >= 2 else 1.0) + (d - 1) + math.sqrt(d))


def _filler(T: int, d: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d))
    x *= (0.9 * NORM_BOUND * rng.random((T, 1))) / np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.random(T)


def _on_bound(d: int, L: float) -> np.ndarray:
    """L(1, …, 1)/√d, shrunk by an ulp where rounding left its norm above L (contexts are
    checked exactly)."""
    from dpledger.policies.contextual.environments import fit_to_bound
    return fit_to_bound(np.full((1, d), L / math.sqrt(d)), L)[0][0]


def whitebox_records(policy, d: int):
    """((x, r) of D, (x′, r′) of D′, description) of the first record (module docstring)."""
    from dpledger.policies.contextual.private_loop import STAT_ENTRIES, STAT_JOINT
    plan_stat = _stat(policy)
    L = NORM_BOUND
    if plan_stat == STAT_JOINT:
        if policy.params.get("mode") == "wishart":
            x = _on_bound(d, L)
            return ((x, 1.0), (np.zeros(d), 0.0),
                    "first record [x; y] = (L(1, ..., 1)/sqrt(d), 1) on D, the zero record on D'")
        x = np.zeros(d)
        x[0] = L
        return ((x, 1.0), (-x, 1.0), "first record [x; y] = (1, 0, ..., 1) on D and "
                "(-1, 0, ..., 1) on D': orthogonal, |v v^T - w w^T|_F = sqrt(2) (L^2 + 1), "
                "the certificate's Frobenius sensitivity")
    if plan_stat == STAT_ENTRIES:
        ((x0, r0), (x1, r1)), v = entries_pair(d)
        return ((x0, r0), (x1, r1), f"first record: the change maximising sum_e |delta_e|/"
                f"sensitivity_e on a grid ({v:.4g} sensitivities per node)")
    x = _on_bound(d, L)
    return ((x, 1.0), (x, 0.0), "first record: context L(1, ..., 1)/sqrt(d), reward 1 on D and "
            "0 on D' (|delta|_2 = L, the certificate's sensitivity)")


def _stat(policy) -> int:
    from dpledger.policies.contextual.private_loop import STAT_ENTRIES, STAT_JOINT, STAT_REWARD
    if policy.name == "jdp-linucb":
        return STAT_JOINT
    if policy.name in ("dp-linucb-mt", "dp-lints-mt"):
        return STAT_ENTRIES
    if policy.name in ("reward-dp-linucb", "adac-oful"):
        return STAT_REWARD
    if policy.name == "episode-linucb":          # the episode's item is jdp-linucb's
        return STAT_JOINT
    raise DpledgerError(f"no contextual audit for policy {policy.name!r}: the audits cover "
                        "jdp-linucb, dp-linucb-mt, dp-lints-mt, reward-dp-linucb, "
                        "episode-linucb and adac-oful")


def contextual_pair(policy, T: int, d: int, mode: str):
    """(env of D, env of D′, description) (module docstring)."""
    from dpledger.policies.contextual.environments import contextual_table
    K = 2
    if mode == "whitebox":
        (x0, r0), (x1, r1), what = whitebox_records(policy, d)
        fx, fr = _filler(T, d)
        envs = []
        for x, r in ((x0, r0), (x1, r1)):
            ctx = np.repeat(fx[:, None, :], K, axis=1)
            rew = np.repeat(fr[:, None], K, axis=1)
            ctx[0, :, :] = x
            rew[0, :] = r
            envs.append(contextual_table(ctx, rew, norm_bound=NORM_BOUND))
        return envs[0], envs[1], ("both arms hold the same context and reward in every row (the "
                                  "records do not depend on the actions); " + what)
    if d < 2:
        raise DpledgerError("the black-box pair needs --dim >= 2 (one axis per arm)")
    ctx = np.zeros((T, K, d))
    ctx[:, 0, 0] = NORM_BOUND
    ctx[:, 1, 1] = NORM_BOUND
    envs = []
    for first in ((1.0, 0.0), (0.0, 1.0)):
        rew = np.zeros((T, K))
        rew[0] = first
        envs.append(contextual_table(ctx, rew, norm_bound=NORM_BOUND))
    return envs[0], envs[1], ("arm 0's context is L e_0 and arm 1's L e_1 in every row; rewards "
                              "0 except row 1: (1, 0) on D, (0, 1) on D'; score: pulls of arm 0 "
                              "in rounds 2..T")


def clean_node_sums(env, stat: int, stops) -> np.ndarray:
    """(nodes, E): the clean sum of every node the first record enters — a node over items
    [0, stop) for each ``stop`` (the binary tree's level j: 2^j) — computed from the table
    (the records are the rows')."""
    ctx, rew = env.contexts, env.rewards
    items = np.array([item_of(stat, ctx[i, 0], (rew[i, 0] - env.lo) / (env.hi - env.lo))
                      for i in range(max(stops))])
    c = np.cumsum(items, axis=0)
    return c[[s - 1 for s in stops]]


def first_record_draws(policy, problem, nodes: int) -> list[tuple[int, int]]:
    """(push, stop) of every node holding the first record: the policy's own list when it has
    one (the private linear policies, binary or smooth trees: ``jdp-linucb``,
    ``dp-linucb-mt``, ``dp-lints-mt``, ``reward-dp-linucb``), else the binary tree's level-j
    node at push 2^j over [0, 2^j)."""
    if hasattr(policy, "first_record_nodes"):
        return policy.first_record_nodes(problem)
    return [(1 << j, 1 << j) for j in range(nodes)]


def node_llr(spec, z: np.ndarray, delta: np.ndarray, wishart_v: np.ndarray | None = None
             ) -> np.ndarray:
    """Log-likelihood ratio, per trial, of captured nodes z (trials, nodes, E) — each the
    released p-sum minus D's clean sum — of D′ (clean + δ) against D, under the node law
    ``spec`` (:func:`~dpledger.mechanisms.matrix.noise_spec`):

    * symmetric-matrix / vector Gaussian: Σ_e (z_e δ_e − δ_e²/2)/s_e² (s_e² = σ², 2σ² on a
      matrix diagonal);
    * Laplace per entry: Σ_e (|z_e| − |z_e − δ_e|)/b_e;
    * Wishart W_p(L̃²I, k), D′ the zero record (δ = −v vᵀ): a monotone function of the
      likelihood ratio, Σ_nodes ((k − p − 1)/2)·ln(1 − vᵀZ⁻¹v) with Z = z (the node's output
      minus the clean sum *without* v: the shift by v vᵀ is applied here), −tr term dropped
      (a constant); on D it is a log-density ratio of D to D′ up to that constant."""
    from dpledger.mechanisms import matrix as mx
    kind, sigma, fscales, _, k, p = spec
    if kind in (mx.GAUSS_SYM, mx.GAUSS_VEC):
        var = np.full(z.shape[-1], sigma * sigma)
        if kind == mx.GAUSS_SYM:
            var[mx.diagonal_mask(int(p))] *= 2.0
        return np.einsum("tne,e->t", z, delta / var) - z.shape[1] * 0.5 * float(
            np.sum(delta * delta / var))
    if kind == mx.LAPLACE:
        nz = np.flatnonzero(delta)
        mag = np.abs(delta[nz])
        sy = z[:, :, nz] * np.sign(delta[nz])
        return np.sum(np.clip(2.0 * sy - mag, -mag, mag) / fscales[nz], axis=(1, 2))
    if kind == mx.WISHART:
        p = int(p)
        iu = np.triu_indices(p)
        Z = np.zeros(z.shape[:2] + (p, p))
        Z[..., iu[0], iu[1]] = z
        Z[..., iu[1], iu[0]] = z
        Zs = Z + np.outer(wishart_v, wishart_v)        # the clean sum without v: + v vᵀ back
        sol = np.linalg.solve(Zs, np.broadcast_to(wishart_v, Zs.shape[:-1])[..., None])[..., 0]
        s = 1.0 - sol @ wishart_v
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.where(s > 0, np.log(np.where(s > 0, s, 1.0)), LOG_FLOOR)
        return 0.5 * (int(k) - p - 1) * np.sum(lg, axis=1)
    raise DpledgerError("no white-box score for this policy's node noise")


def _run_side(policy, env, problem, trials: int, seed: int, side: int, mode: str, nodes: int,
              score=None, progress=None, done: int = 0, total: int = 0) -> np.ndarray:
    """One score per trial: white-box, ``score`` of each chunk's captured nodes ((n, nodes,
    2E): noise, then clean sums), reduced as soon as the chunk is played, so only the scores
    are held; black-box, the pulls of arm 0 after round 1."""
    from dpledger.audits.policy import chunk_generator
    plan = policy.plan(problem)
    E = plan.blocks * plan.entries
    rows = [t - 1 for t, _ in first_record_draws(policy, problem, nodes)]
    policy._capture_rows = rows[-1] + 1 if mode == "whitebox" else 0
    policy._capture_clean = mode == "whitebox"
    out = np.empty(trials)
    cap = np.empty((min(trials, CHUNK), nodes, 2 * E)) if mode == "whitebox" else None
    for c in range(0, trials, CHUNK):
        rng = chunk_generator(seed, side, c // CHUNK)
        m = min(trials, c + CHUNK) - c
        for i in range(m):
            run = policy.run_one(rng, env, problem)
            if mode == "whitebox":
                got = run.extra["noise"]
                cap[i, :, :E] = got[rows, :E]
                cap[i, :, E:] = got[rows, E + 1:]
            else:
                out[c + i] = np.count_nonzero(run.actions[1:] == 0)
        if mode == "whitebox":
            out[c:c + m] = score(cap[:m])
        if progress is not None:
            progress(done + c + m, total)
    return out


def memory_estimate(trials: int, nodes: int, entries: int, p: int) -> int:
    """Bytes an audit holds at its peak: both sides' scores and the selection's sorted copies
    (5 floats a trial), one chunk's captured nodes and the score's temporaries (4 copies; a
    Wishart node also its p×p matrices), and a fixed 256 MB for the interpreter and libraries."""
    chunk = min(trials, CHUNK) * nodes * (4 * 2 * entries + 3 * p * p) * 8
    return (256 << 20) + 5 * 8 * 2 * trials + chunk


def audit_contextual(policy, *, trials: int, mode: str = "whitebox", T: int | None = None,
                     dim: int = DEFAULT_DIM, seed: int = 0,
                     confidence: float = DEFAULT_CONFIDENCE,
                     selection_fraction: float = DEFAULT_SELECTION_FRACTION,
                     progress=None) -> AuditResult:
    """Audit a private contextual policy on :func:`contextual_pair` (module docstring): T rounds
    (default 8 white-box, 64 black-box), context dimension ``dim``, no delay, float sampler."""
    from dpledger.policies.contextual.base import problem_of
    from dpledger.policies.contextual.private_loop import STAT_ENTRIES
    trials = check_count("trials", trials, minimum=2)
    if mode not in ("whitebox", "blackbox"):
        raise DpledgerError(f"mode must be whitebox or blackbox, got {mode!r}")
    if not getattr(policy, "private", False):
        raise DpledgerError(f"{policy.name} makes no private release: a contextual audit needs "
                            "a private policy")
    stat = _stat(policy)
    T = (DEFAULT_T if mode == "whitebox" else DEFAULT_BLACKBOX_T) if T is None else int(T)
    T = check_count("horizon", T, minimum=1)
    dim = check_count("dim", dim, minimum=1)
    if T > 1 << 16:
        raise DpledgerError("a contextual audit replays its pair per trial: use --horizon <= "
                            "65536")
    if getattr(policy, "episodic", False) and mode == "whitebox":
        from dpledger.audits.contextual_episodes import audit_episodes
        return audit_episodes(policy, trials=trials, T=T, dim=dim, seed=seed,
                              confidence=confidence, selection_fraction=selection_fraction,
                              progress=progress)
    env0, env1, description = contextual_pair(policy, T, dim, mode)
    problem = problem_of(env0, T, 0)
    plan = policy.plan(problem)
    nodes = policy.nodes(problem)       # releases a record enters (tree nodes, or one episode)
    cert_obj = policy.certificate(problem)
    wishart = stat == 0 and policy.params.get("mode") == "wishart"
    cert = certificate_summary(cert_obj)
    extra: dict = {"policy": {"name": policy.name, "params": dict(policy.params)}, "horizon": T,
                   "dim": dim, "arms": 2, "seed": int(seed), "contextual": True}
    delta_cert = GDP_DELTA
    if wishart:
        delta_cert = float(policy.params["delta"])
        eps_at = certificate_summary(cert_obj, deltas=[delta_cert])["epsilon_at_delta"]
        cert["approx"] = {"epsilon": next(iter(eps_at.values())), "delta": delta_cert,
                          "basis": "the certificate's epsilon at the policy's delta"}
    currency = currency_of(cert)
    audit_delta = GDP_DELTA if currency == "mu" else (delta_cert if wishart else 0.0)
    from dpledger.resources import check_fits, fmt_bytes
    E = plan.blocks * plan.entries
    p = int(plan.spec[5]) if wishart else 0
    need = memory_estimate(trials, nodes, E, p)
    check_fits("this audit", need, f"use fewer --trials (each keeps 80 B) or a smaller --dim "
               f"(one chunk of {CHUNK} trials' captured nodes: "
               f"{fmt_bytes(need - (256 << 20) - 80 * trials)})")
    total = 2 * trials
    pair = {"round": 1, "from": "D", "to": "D'", "description": description}
    if mode == "whitebox":
        firsts = first_record_draws(policy, problem, nodes)
        if len(firsts) != nodes:
            raise DpledgerError(f"{policy.name}: the first record lies in {len(firsts)} nodes, "
                                f"its certificate counts {nodes}")
        cD = clean_node_sums(env0, stat, [s for _, s in firsts])
        (x0, r0), (x1, r1), _ = whitebox_records(policy, dim)
        delta = item_of(stat, x1, r1) - item_of(stat, x0, r0)
        v = np.r_[x0, r0] if wishart else None
        mismatch = [0.0]

        def scorer(expected):
            def score(cap):
                # the policy's own clean sums must be the auditor's (D: cD; D′: cD + δ)
                mismatch[0] = max(mismatch[0], float(np.max(np.abs(cap[:, :, E:] - expected))))
                return node_llr(plan.spec, cap[:, :, :E] + cap[:, :, E:] - cD, delta, v)
            return score

        s0 = _run_side(policy, env0, problem, trials, seed, 0, mode, nodes, scorer(cD),
                       progress, 0, total)
        s1 = _run_side(policy, env1, problem, trials, seed, 1, mode, nodes,
                       scorer(cD + delta), progress, trials, total)
        extra["clean_sum_mismatch"] = mismatch[0]
        if not wishart:
            from dpledger.audits.policy import best_possible_for
            bp = best_possible_for(cert_obj, trials, confidence, selection_fraction, currency,
                                   r_certified(cert))
            if bp is not None:
                extra["best_possible"] = bp
        smooth = policy.params.get("counter") == "smooth"
        pushes = ", ".join(str(t) for t, _ in firsts) if smooth else "1, 2, 4, ..."
        extra["whitebox_capture"] = (f"every node holding the first record ({nodes} nodes: "
                                     f"pushes t = {pushes}), released "
                                     f"{'node sum' if smooth else 'p-sum'} minus D's clean "
                                     "sum, scored by the likelihood ratio of all of them")
        extra["score"] = "log-likelihood ratio of the captured nodes"
        if stat == STAT_ENTRIES:
            best = float(np.sum(np.abs(delta) / _entry_sensitivities(dim)))
            lim = entries_limit(dim)
            full = dim * (dim + 1) / 2 + dim
            pair["limit_reason"] = (
                f"no record change attains the certificate: it charges each of the "
                f"{dim * (dim + 1) // 2 + dim} entries its own worst case ({full:g} "
                f"sensitivities per node), while one record moves at most {lim:.4g} of them "
                f"(sum |x_i^2 - x'_i^2| <= 2L^2, sum |x_i x_j - x'_i x'_j| <= (d - 1) L^2, sum "
                f"|r x_i - r' x'_i| <= 2 sqrt(d) L): ratio <= {lim / full:.3f}; this pair "
                f"moves {best:.4g}, so its exact epsilon is {best / full:.3f} of the "
                "certificate")
            extra["pair_exact_ratio"] = best / full
            extra["ratio_limit"] = lim / full
        if wishart:
            extra["ratio_limit"], pair["limit_reason"] = _wishart_policy_limit(
                plan, nodes, delta_cert, cert["approx"]["epsilon"])
    else:
        s0 = _run_side(policy, env0, problem, trials, seed, 0, mode, nodes, None, progress, 0,
                       total)
        s1 = _run_side(policy, env1, problem, trials, seed, 1, mode, nodes, None, progress,
                       trials, total)
        extra["score"] = "pulls of arm 0 in rounds 2..T"
        lim = blackbox_limit(plan, stat, dim, nodes, r_certified(cert))
        if lim is not None and lim[0] < 1.0 - 1e-9:     # the certificate is rounded up
            extra["ratio_limit"] = lim[0]
            pair["limit_reason"] = lim[1]
    sa = audit_scores(s0, s1, confidence=confidence, selection_fraction=selection_fraction,
                      delta=audit_delta, currency=currency)
    extra["ceiling"] = ceiling(trials, confidence=confidence,
                               selection_fraction=selection_fraction, currency=currency,
                               delta=audit_delta)
    from dpledger.audits.result import plot_data_fixed
    res = AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials, mode=mode,
                      extra=extra, plot_data=plot_data_fixed(s0, s1, sa, trials, currency))
    res.certificate_object = cert_obj       # in memory only: the trade-off curves' certificate
    return res


def r_certified(cert: dict) -> float | None:
    """The certificate in the audit's currency (μ, pure ε, or ε at δ)."""
    if cert.get("approx") is not None:
        return cert["approx"]["epsilon"]
    return cert.get("gdp_mu") if currency_of(cert) == "mu" else cert.get("pure_epsilon")


def blackbox_limit(plan, stat: int, d: int, nodes: int, certified: float | None):
    """(ratio bound, reason) of the black-box pair, or None (Wishart, unbounded).  Given round
    1's action a₁ (the same law on both sides) the first record changes by a fixed δ — (L e₀, 1)
    to (L e₀, 0), or (L e₁, 0) to (L e₁, 1) — and enters ``nodes`` node releases whatever the
    later (adaptive) records are, so the actions, post-processing of those releases and of a₁,
    are at most √nodes·‖δ‖ (Gaussian, μ, adaptive GDP composition: Dong, Roth & Su 2022,
    Thm 3.2) or nodes·Σ_e |δ_e|/b_e (Laplace, pure ε) away; hiding a₁ only makes the test
    harder."""
    from dpledger.mechanisms import matrix as mx
    kind, sigma, fscales, _, _, p = plan.spec
    if certified is None or kind not in (mx.GAUSS_SYM, mx.GAUSS_VEC, mx.LAPLACE):
        return None
    worst = 0.0
    for arm, (r0, r1) in ((0, (1.0, 0.0)), (1, (0.0, 1.0))):
        x = np.zeros(d)
        x[arm] = NORM_BOUND
        delta = item_of(stat, x, r1) - item_of(stat, x, r0)
        if kind == mx.LAPLACE:
            val = nodes * float(np.sum(np.abs(delta) / fscales))
        else:
            var = np.full(delta.size, sigma * sigma)
            if kind == mx.GAUSS_SYM:
                var[mx.diagonal_mask(int(p))] *= 2.0
            val = math.sqrt(nodes * float(np.sum(delta * delta / var)))
        worst = max(worst, val)
    cur = "mu" if kind != mx.LAPLACE else "epsilon"
    return worst / certified, (
        f"the black-box pair is at most {cur} {worst:.4g}, {worst / certified:.3f} of the "
        f"certificate {certified:.4g}. Given round 1's action (the same law on D and D'), the "
        f"first record's change is fixed (one reward of a one-hot context) and enters "
        f"{nodes} node releases; the actions are post-processing of those releases, so "
        "composition of the nodes at this change bounds them (the certificate's change moves "
        "every entry's sensitivity at once)")


def _entry_sensitivities(d: int) -> np.ndarray:
    L = NORM_BOUND
    return np.r_[np.full(d * (d + 1) // 2, L * L), np.full(d, 2.0 * L)]


def _wishart_policy_limit(plan, nodes: int, delta: float, cert_eps: float
                          ) -> tuple[float, str]:
    """Basic composition of the exact per-node profile of the Wishart pair
    (:func:`~dpledger.audits.vector_releases.wishart_pair_epsilon` at δ/nodes): an upper bound
    on the ε at δ of the captured nodes, hence on what this audit can show."""
    from dpledger.accounting.releases import WishartRelease
    from dpledger.audits.vector_releases import wishart_pair_epsilon
    rel = plan.releases[0]
    node = WishartRelease(dim=rel.dim, k=rel.k, bound=rel.bound, delta=rel.delta)
    eps_node = wishart_pair_epsilon(node, delta / nodes)
    bound = nodes * eps_node
    return bound / cert_eps, (f"the pair's epsilon at delta = {delta:g} is at most {bound:.4g}, "
            f"{bound / cert_eps:.3f} of the certificate's {cert_eps:.4g}. Each of the {nodes} "
            f"captured nodes is the Wishart pair of a record's Gram against the zero record "
            f"(k = {rel.k}, p = {rel.dim}), whose exact epsilon at delta/{nodes} is "
            f"{eps_node:.4g} (chi-square tails); basic composition bounds the nodes together")


__all__ = ["audit_contextual", "contextual_pair", "node_llr", "entries_pair", "entries_limit",
           "item_of", "clean_node_sums", "whitebox_records"]
