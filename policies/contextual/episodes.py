"""Adaptive-episode private linear contextual policies (issue 32 §2): ``adac-oful`` (rewards
private, contexts public; Azize & Basu 2023) and ``episode-linucb`` (record-private, joint DP).

A statistic is released once per episode from that episode's records only, so each record is in
exactly one release: its certificate is one Gaussian release, whatever T (a tree's record
enters ⌈log₂ T⌉ node releases).  The loop is :mod:`~dpledger.policies.contextual.episode_loop`;
the releases are the existing vector and symmetric-matrix Gaussians
(:class:`~dpledger.accounting.releases.GaussianVectorRelease`,
:class:`~dpledger.accounting.releases.SymmetricMatrixGaussianRelease`) or, with the exact
sampler, their lattice forms (:mod:`dpledger.accounting.lattice`).  σ is solved with dpledger's
accountant (:func:`~dpledger.accounting.calibration.accounted_sigma`, or
:func:`~dpledger.accounting.calibration.accounted_sigma_rho` for a zCDP target ``rho``) so
that the certificate meets the target.  Ledger rows: one per release, over the records
[start, stop) of its stream that the episode holds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpledger.accounting import theorems
from dpledger.accounting.calibration import accounted_sigma, accounted_sigma_rho
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.lattice import sym_matrix_lattice, vector_lattice
from dpledger.accounting.releases import (GaussianVectorRelease, Release,
                                          SymmetricMatrixGaussianRelease)
from dpledger.errors import DpledgerError
from dpledger.mechanisms import matrix as mx
from dpledger.policies.base import Param, RunOutput
from dpledger.policies.contextual.base import ContextualProblem, run_arrays
from dpledger.policies.contextual.episode_loop import (E_ALPHA, E_GROWTH, E_LAMBDA,
                                                       E_MEMORY, E_NOISE_VAR, E_REFRESH, E_WIDTH_COEF,
                                                       E_BOUND, E_KAPPA,
                                                       E_SHIFT_COEF,
                                                       EP_JOINT,
                                                       EP_REWARD, I_LENGTH, MEM_ALL,
                                                       MEM_EPISODES, MEM_LAST, run_episodes)
from dpledger.policies.contextual.linear import LAMBDA
from dpledger.policies.contextual.private import PrivateLinearPolicy, _moves
from dpledger.policies.contextual.private_loop import C_PSD_SCALE, C_XI, N_CONSTS

RHO = Param("rho", 0.0, "float", "ρ of a ρ-zCDP target (> 0); unset: the (ε, δ) target",
            omit_at_default=True)
# rewards in [0, 1] are 1/2-sub-Gaussian (Hoeffding): the reward noise scale R of the models
REWARD_SD = 0.5
ALPHA = Param("alpha", 1.0, "positive", "confidence width α: θ̂ᵀx + α·√(xᵀV⁻¹x)")


@dataclass(frozen=True, eq=False)
class EpisodePlan:
    """What one run draws and records: the statistic (``kind``), its streams (``n_stat``:
    rows of ``acc``/``pre``) of ``width`` numbers each, the noise law of a block (``spec``),
    the interned release(s), the lattice ``units`` (unit of the Gram/joint entries, of Σ r·x,
    their inverses: 0 for the float sampler), the loop constants, and ``drawn`` (σ and the
    schedule, for run.json and the docs)."""

    kind: int
    n_stat: int
    width: int
    spec: tuple
    releases: tuple[Release, ...]
    units: np.ndarray
    consts: np.ndarray
    first: int
    drawn: dict = field(default_factory=dict)
    whiten: bool = False    # noise_shape=data: each model's episode sums enter whitened

    # the tree plan's fields the shared audit helpers read
    @property
    def blocks(self) -> int:
        return 1

    @property
    def entries(self) -> int:
        return self.width


def _consts(alpha: float, lam: float, shift_coef: float = 0.0, growth: float = 0.0,
            psd_scale: float = 1.0, last: bool = False, noise_var: float = 0.0,
            width_coef: float = 0.0, per_episode: bool = False, kappa: float = 0.0,
            bound: float = 0.0) -> np.ndarray:
    c = np.zeros(E_REFRESH + N_CONSTS)
    c[E_KAPPA], c[E_BOUND] = kappa, bound
    c[E_MEMORY] = MEM_LAST if last else MEM_EPISODES if per_episode else MEM_ALL
    c[E_NOISE_VAR] = noise_var
    c[E_WIDTH_COEF] = width_coef
    c[E_ALPHA], c[E_LAMBDA], c[E_SHIFT_COEF], c[E_GROWTH] = alpha, lam, shift_coef, growth
    c[E_REFRESH + C_XI] = alpha            # refresh_joint's width ξ + 0·√(…) = α
    c[E_REFRESH + C_PSD_SCALE] = psd_scale
    return c


def solve_sigma(make, epsilon: float, delta: float, rho: float) -> float:
    """σ of one release per record: the smallest meeting the zCDP target ρ when set, else the
    (ε, δ) target (dpledger's accountant)."""
    if rho:
        return accounted_sigma_rho(make, 1, rho)
    return accounted_sigma(make, 1, epsilon, delta)


class _EpisodePolicy(PrivateLinearPolicy):
    """Common part: targets, plan cache, certificate (one release), one run."""

    episodic = True

    def __init__(self, **params):
        explicit_rho = "rho" in params
        super().__init__(**params)
        if not self.params["delta"] < 1.0:
            raise DpledgerError(f"delta must lie in (0, 1), got {self.params['delta']!r}")
        if explicit_rho and not self.params["rho"] > 0:
            raise DpledgerError(f"rho must be > 0 (a zCDP target), got {self.params['rho']!r}")

    @property
    def rho(self) -> float:
        return float(self.params["rho"])

    def nodes(self, problem: ContextualProblem) -> int:
        """Releases a record enters: one (its episode's), once any record can be delivered."""
        return 1 if problem.max_observations else 0

    def certificate(self, problem: ContextualProblem) -> Certificate:
        plan = self.plan(problem)
        comp = Composition.of([(plan.releases[0], 1)]) if self.nodes(problem) else Composition()
        online = problem.env != "replay"
        basis = ("a record lies in exactly one episode, whose statistic is released once: "
                 f"1× {plan.releases[0].kind}")
        return Certificate(candidates=(Candidate(comp, Witness(0, 0, 1 if online else None),
                                                 basis),), adaptive=False)

    def episode_bound(self, problem: ContextualProblem) -> int:
        raise NotImplementedError

    def row_capacity(self, problem: ContextualProblem) -> int:
        return self.episode_bound(problem)

    def model_bytes(self, problem: ContextualProblem) -> int:
        plan = self.plan(problem)
        d, M = problem.dim, problem.n_streams
        return (8 * (2 * M * d * d + 3 * M * d + 4 * plan.n_stat * plan.width + 4 * d * d)
                + 24 * self.episode_bound(problem))

    def new_state(self, problem: ContextualProblem) -> dict:
        """Fresh loop state (the step form checkpoints these arrays)."""
        plan = self.plan(problem)
        d, M = problem.dim, problem.n_streams
        ist = np.zeros((plan.n_stat, 4), np.int64)
        ist[:, I_LENGTH] = plan.first
        return dict(acc=np.zeros((plan.n_stat, plan.width)),
                    pre=np.zeros((plan.n_stat, plan.width)), ist=ist, ld=np.zeros((M, 2)),
                    chol=np.zeros((M, d, d)), chol_cur=np.zeros((M, d, d)),
                    chol_ep=np.zeros((M, d, d)),
                    wmap=np.tile(np.eye(d), (M, 1, 1)) if plan.whiten else np.zeros((0, d, d)),
                    theta=np.zeros((M, d)), widths=np.zeros(M), consts=plan.consts.copy())

    def run_one(self, rng, env, problem: ContextualProblem) -> RunOutput:
        plan = self.plan(problem)
        T = problem.horizon
        s = self.new_state(problem)
        cap = self.episode_bound(problem)
        rows = np.zeros((3, cap), np.int64)
        nrow = np.zeros(1, np.int64)
        D = plan.width
        capture = np.zeros((self._capture_rows, 2 * D + 1 if self._capture_clean else D + 1))
        actions, regret, obs_stream, obs_round, info = run_arrays(T)
        rounds, n_obs, reward_sum, uniform_sum = run_episodes(
            rng, env.as_kernel(), T, problem.shared, problem.delay, plan.kind, plan.spec,
            s["acc"], s["pre"], s["ist"], s["ld"], s["chol"], s["chol_cur"], s["chol_ep"],
            s["wmap"], s["theta"], s["widths"], s["consts"], plan.units, capture, rows, nrow, actions,
            regret, obs_stream, obs_round, info)
        n = int(nrow[0])
        if n > cap:           # a bound of ours failed: say so rather than drop ledger rows
            raise DpledgerError(f"{self.name}: {n} episodes exceed the bound {cap}")
        r = rows[:, :n]
        out = RunOutput(actions=actions, noise_draws=n, extra={
            "regret": regret, "obs_stream": obs_stream[:n_obs], "obs_round": obs_round[:n_obs],
            "rounds": int(rounds), "reward_sum": float(reward_sum),
            "uniform_sum": float(uniform_sum), "psd_repairs": int(info[0]),
            "refreshes": int(info[1])})
        out.rows = np.vstack([r, np.zeros((1, n), np.int64),
                              np.ones((1, n), np.int64)]).astype(np.int64)
        if self._capture_rows:
            out.extra["noise"] = capture
        return out


def _sigma_release(problem, make_float, make_lattice):
    """(make(σ) of the recorded release, lattice flag) for the problem's sampler."""
    return (make_lattice if problem.lattice_bits else make_float), bool(problem.lattice_bits)


class EpisodeLinUCB(_EpisodePolicy):
    """Record-private adaptive-episode LinUCB (issue 32 §2; our construction, reconstructed):
    context and reward private, joint DP.  Each delivered record joins the open episode's
    clean sum of jdp-linucb's statistic [x; y][x; y]ᵀ (y the rescaled reward, ‖[x; y]‖² ≤ L̃² =
    L² + 1), in the block of the model it joins; when the episode is full, every model's block
    is released once with the symmetric Gaussian of σ (the arm a record joins is private, so
    every block is noised: a changed record may move between two blocks, one Frobenius bound
    Δ_F = √2·L̃² over both, as jdp-linucb).  The model is the sum of the released episodes:
    V = noisy Gram + shift_n·I, θ̂ = V⁻¹·(noisy Σ y·x), index θ̂ᵀx + α‖x‖_{V⁻¹}; one
    factorisation per model per episode.

    Choices (docs/algorithms.md#episode-linucb): the **doubling schedule** — episode j holds
    n₀·2^j delivered records (n₀ = ``first_episode``; the count is public, so the schedule
    leaks nothing), so about log₂(T/n₀) releases; the records of the last, unfinished episode
    are never read; the shift after n releases, shift_n = λ + κ·2σ√(np), p = d + 1, κ =
    ``shift_scale`` (1: the sum of n such noise matrices — GOE-scaled, entries of variance nσ²
    off the diagonal — has spectral norm 2σ√(np) to leading order, the semicircle's edge; the
    regulariser is the noise's expected norm, a failed factorisation repaired by a larger
    shift, :func:`~dpledger.policies.contextual.private_loop.factor_psd`); the width α + γ_n/
    √shift_n (``noise_width=bound``): α as LinUCB's, plus Shariff & Sheffet (2018)'s noise
    term of the confidence radius, ‖h‖_{V⁻¹} ≤ ‖h‖/√λ_min(V), with γ_n = σ√n·(√d +
    √(2 ln 2T)) the high-probability bound on the released Σ y·x noise h (Gaussian
    concentration of ‖h‖ at probability 1 − 1/(2T)) and λ_min(V) ≈ shift_n.  The exact sampler: entries
    rounded to L̃²·2^-16, independent discrete Gaussians (:mod:`dpledger.accounting.lattice`).
    Ties uniformly at random."""

    name = "episode-linucb"
    title = "Record-private adaptive-episode LinUCB (joint DP, doubling episodes)"
    provenance = "reconstructed"
    params_spec = (
        Param("epsilon", 1.0, "positive", "privacy ε of the (ε, δ) target per record"),
        Param("delta", 0.1, "positive", "privacy δ of the (ε, δ) target, in (0, 1)"),
        RHO, ALPHA, LAMBDA,
        Param("first_episode", 1, "int", "records of the first episode n₀ (>= 1); episode j "
              "holds n₀·2^j"),
        Param("shift_scale", 1.0, "positive", "κ: the shift after n episodes is λ + κ·2σ√(np) "
              "(1: the noise's expected spectral norm)"),
        Param("noise_width", "bound", "choice", "bound: the width after n episodes is α + "
              "γ_n/√shift_n, γ_n = σ√n·(√d + √(2 ln 2T)) the released Σ y·x noise's norm bound "
              "(Shariff & Sheffet 2018's term); none: α", choices=("bound", "none")),
    )

    def __init__(self, **params):
        super().__init__(**params)
        if self.params["first_episode"] < 1:
            raise DpledgerError(f"first_episode must be >= 1, got "
                                f"{self.params['first_episode']!r}")

    def theorem(self, problem: ContextualProblem):
        p = self.params
        return theorems.episode_linucb(p["epsilon"], p["delta"], self.rho)

    def episode_bound(self, problem: ContextualProblem) -> int:
        """Episodes a run can close: n₀(2^j − 1) ≤ max(T − D, 0) records."""
        n0 = self.params["first_episode"]
        return max(problem.max_observations // n0 + 1, 1).bit_length()

    def _make_plan(self, problem: ContextualProblem) -> EpisodePlan:
        prm = self.params
        n0 = int(prm["first_episode"])
        if problem.horizon and n0 > max(problem.max_observations, 1):
            raise DpledgerError(
                f"episode-linucb: the first episode ({n0} records) cannot finish within the "
                f"{problem.max_observations} records a run of T = {problem.horizon} delivers; "
                "use a smaller first_episode")
        p, M, bits = problem.dim + 1, problem.n_streams, problem.lattice_bits
        L = problem.norm_bound
        lt2 = L * L + 1.0
        frob = math.sqrt(2.0) * lt2
        E = mx.packed_size(p)

        def make_float(s):
            return SymmetricMatrixGaussianRelease(sigma=s, sensitivity=frob, dim=p, blocks=M)

        def make_lattice(s):
            return sym_matrix_lattice(s, frob, lt2, p, bits, _moves(problem))[2]
        make, lattice = _sigma_release(problem, make_float, make_lattice)
        sigma = solve_sigma(make, prm["epsilon"], prm["delta"], self.rho)
        if lattice:
            s_off, s_diag, rel = sym_matrix_lattice(sigma, frob, lt2, p, bits, _moves(problem))
            scales = np.where(mx.diagonal_mask(p), s_diag, s_off)
            spec = mx.noise_spec(mx.DGAUSS, entries=E, iscales=scales, p=p)
            u = lt2 * 2.0 ** -bits
            units = np.array([u, u, 1.0 / u, 1.0 / u])
            drawn = {"sigma": sigma, "lattice_sigma": [int(s_off), int(s_diag)]}
        else:
            rel = make_float(sigma)
            spec = mx.noise_spec(mx.GAUSS_SYM, entries=E, sigma=sigma, p=p)
            units = np.array([1.0, 1.0, 0.0, 0.0])
            drawn = {"sigma": sigma}
        T = max(problem.horizon, 1)
        coef = prm["shift_scale"] * 2.0 * sigma * math.sqrt(p)
        drawn.update(first_episode=n0, schedule="doubling", shift_coefficient=coef)
        wcoef = 0.0
        if prm["noise_width"] == "bound":
            wcoef = sigma * (math.sqrt(p - 1) + math.sqrt(2.0 * math.log(2.0 * T)))
            drawn.update(width_coefficient=wcoef)
        return EpisodePlan(EP_JOINT, 1, M * E, spec, (rel,), units,
                           _consts(prm["alpha"], prm["lambda"], shift_coef=coef,
                                   psd_scale=max(coef, prm["lambda"]), width_coef=wcoef),
                           n0, drawn)


class AdacOFUL(_EpisodePolicy):
    """AdaC-OFUL (Azize & Basu 2023, "Concentrated differential privacy for bandits", arXiv
    2309.00557) — rewards private, contexts public, ρ-zCDP — RECONSTRUCTED (the paper's
    algorithm box was not at hand; docs/algorithms.md#adac-oful).  Each model m (one per arm
    for one context per round, one shared θ for one context per arm) keeps the exact Gram
    matrix A_m = λ·I + Σ x xᵀ (public) and an adaptive episode: it ends when det A_m ≥ (1 + C)·
    det A_m at the episode's start (the rarely-switching OFUL rule of Abbasi-Yadkori, Pál &
    Szepesvári 2011 §5; C = ``growth``, default 0: C from the doubling rule,
    :meth:`log_growth`), and releases the episode's Σ r·x with Gaussian noise N(0, σ²I): a
    reward enters exactly one release (L2 sensitivity L: |r − r′|·‖x‖ ≤ L).  The selection
    model is frozen between episode ends.  ``estimate=episodes`` (default): the posterior of
    every released episode read one by one, each N(G_eθ, R²(G_e + σ²/R²·I)) independently
    (:func:`~dpledger.policies.contextual.episode_loop._episode_likelihood_model`), and with
    ``noise_shape=data`` (its default) each episode's sum whitened by the model's public
    context moments and clipped to L before its noise, so the release and its certificate are
    unchanged (:func:`~dpledger.policies.contextual.episode_loop.whitening_map`);
    ``estimate=likelihood``: the posterior of the released total's own law, b ~ N(Gθ, R²(G + nσ²/R²·I)) after n releases, R = 1/2
    (rewards in [0, 1]) — mean Q⁻¹G(G + sI)⁻¹b, index θ̂ᵀx + α‖x‖_{Q⁻¹}, Q = G(G + sI)⁻¹G +
    λI, s = nσ²/R² (:func:`~dpledger.policies.contextual.episode_loop._likelihood_model`);
    ``estimate=ridge``: θ̂_m = A_m⁻¹·(Σ of the released sums), index θ̂ᵀx + α‖x‖_{A⁻¹}
    (``memory=all``; ``memory=last``: the last closed episode's own Gram and noisy sum;
    ``noise_ridge`` κ: A_m + κσ√n·I after n releases).  σ = L/√(2ρ) for ``rho``, or
    solved with dpledger's accountant for (ε, δ).  The exact sampler: r·x rounded to
    L·2^-16, independent discrete Gaussians.  Ties uniformly at random."""

    name = "adac-oful"
    title = "AdaC-OFUL (Azize & Basu 2023, reconstructed): reward-private, adaptive episodes"
    provenance = "reconstructed"
    record_private = False
    privacy_model = "reward-private"
    params_spec = (
        Param("epsilon", 1.0, "positive", "privacy ε of the (ε, δ) target per reward"),
        Param("delta", 1e-6, "positive", "privacy δ of the (ε, δ) target, in (0, 1)"),
        RHO, ALPHA, LAMBDA,
        Param("growth", 0.0, "float", "C > 0: an episode ends when det A has grown by 1 + C; "
              "0: C from the doubling rule (docs/algorithms.md#adac-oful)"),
        Param("noise_ridge", 0.0, "float", "κ >= 0: the estimate reads A + κσ√n·I after n "
              "releases of its model (0: A itself; memory=all)"),
        Param("memory", "all", "choice", "all: the model is every released episode of its "
              "arm (Gram of all records, Σ of the noisy sums); last: the last closed episode "
              "alone (its Gram, its one noisy sum)", choices=("all", "last")),
        Param("estimate", "episodes", "choice", "ridge: θ̂ = A⁻¹·Σ released; likelihood: the "
              "posterior of the released sums' own law (their noise nσ² beside the rewards' "
              "R² = 1/4), memory=all; episodes: the same posterior read episode by episode "
              "(each released sum weighted by its own episode's Gram against one release's "
              "noise σ²)", choices=("ridge", "likelihood", "episodes")),
        Param("noise_shape", "auto", "choice", "isotropic: Σ r·x released as it is; data: "
              "each episode's sum whitened by the model's public context moments before its "
              "noise (the noise then shaped like the contexts), estimate=episodes; auto: data "
              "under estimate=episodes, else isotropic (docs/algorithms.md#adac-oful)",
              choices=("auto", "isotropic", "data")),
        Param("kappa", 0.01, "positive", "noise_shape=data: the whitening's floor κ, in units "
              "of L² (the moments' eigenvalues below κL² are treated as κL²)"),
    )

    def __init__(self, **params):
        super().__init__(**params)
        if self.params["growth"] < 0 or not math.isfinite(self.params["growth"]):
            raise DpledgerError(f"growth must be > 0 (or 0: the doubling rule), got "
                                f"{self.params['growth']!r}")
        if self.params["noise_ridge"] < 0:
            raise DpledgerError(f"noise_ridge must be >= 0, got {self.params['noise_ridge']!r}")

    def theorem(self, problem: ContextualProblem):
        p = self.params
        return theorems.azize_basu_2023_adac_oful(p["epsilon"], p["delta"], self.rho)

    @property
    def whitened(self) -> bool:
        """Whether each episode's sum enters whitened (``noise_shape``, ``auto`` resolved)."""
        shape = self.params["noise_shape"]
        return shape == "data" or (shape == "auto" and self.params["estimate"] == "episodes")

    def log_growth(self, problem: ContextualProblem) -> float:
        """ln(1 + C) of the episode rule.  ``growth`` = 0 (default): the doubling rule — ln(1 +
        C) = d·ln(1 + nL²/(dλ)) / ⌈log₂(n + 1)⌉ with n = ⌈(T − D)/M⌉ the records of one model
        if the M models share them evenly: the determinant bound's total growth (below) spread
        over the doubling trick's ⌈log₂(n + 1)⌉ episodes, so a model releases no more often
        than a count-doubling schedule would while its episodes still follow det A.  Public
        (T, D, d, L, λ, M): the rule leaks nothing."""
        C = self.params["growth"]
        if C > 0:
            return math.log1p(C)
        d, M, lam = problem.dim, problem.n_streams, self.params["lambda"]
        n = max(-(-problem.max_observations // M), 1)
        total = d * math.log1p(n * problem.norm_bound ** 2 / (d * lam))
        # estimate=episodes weighs each released episode by its own Gram, so a short noisy
        # episode no longer adds its noise to every later estimate: twice as many episodes
        # (fresher models) — chosen on digits, docs/algorithms.md#adac-oful
        per = 2 if self.params["estimate"] == "episodes" else 1
        return total / (per * n.bit_length())

    def episode_bound(self, problem: ContextualProblem) -> int:
        """Episodes a run can close: a model's ln det A grows by ≥ ln(1 + C) per episode and by
        at most d·ln(1 + n·L²/(d·λ)) over n records (det ≤ (trace/d)^d), n ≤ max(T − D, 0);
        summed over the models (at most n records in all), and never above n."""
        n = problem.max_observations
        d, M = problem.dim, problem.n_streams
        lam = self.params["lambda"]
        per = d * math.log1p(n * problem.norm_bound ** 2 / (d * lam)) / self.log_growth(problem)
        return int(min(n, M * (math.floor(per * (1 + 1e-9)) + 1))) + 1

    def _make_plan(self, problem: ContextualProblem) -> EpisodePlan:
        prm = self.params
        d, M, bits, L = problem.dim, problem.n_streams, problem.lattice_bits, problem.norm_bound

        def make_float(s):
            return GaussianVectorRelease(sigma=s, sensitivity=L, dim=d)

        def make_lattice(s):
            return vector_lattice(s, L, L, d, bits)[1]
        make, lattice = _sigma_release(problem, make_float, make_lattice)
        sigma = solve_sigma(make, prm["epsilon"], prm["delta"], self.rho)
        if lattice:
            s_int, rel = vector_lattice(sigma, L, L, d, bits)
            spec = mx.noise_spec(mx.DGAUSS, entries=d, iscales=np.full(d, s_int))
            u = L * 2.0 ** -bits
            units = np.array([u, u, 1.0 / u, 1.0 / u])
            drawn = {"sigma": sigma, "lattice_sigma": int(s_int)}
        else:
            rel = make_float(sigma)
            spec = mx.noise_spec(mx.GAUSS_VEC, entries=d, sigma=sigma)
            units = np.array([1.0, 1.0, 0.0, 0.0])
            drawn = {"sigma": sigma}
        lg = self.log_growth(problem)
        drawn.update(growth=prm["growth"], episode_rule="det A grows by 1 + C")
        if not prm["growth"]:
            drawn.update(log_growth=lg, episode_rule="det A grows by 1 + C, ln(1 + C) from "
                         "the doubling rule")
        noise_var = 0.0
        whiten = self.whitened
        if prm["noise_shape"] == "data" and prm["estimate"] != "episodes":
            raise DpledgerError("adac-oful: noise_shape=data needs estimate=episodes (each "
                                "episode's release is read with its own whitening map)")
        if prm["estimate"] in ("likelihood", "episodes"):
            if prm["memory"] != "all" or prm["noise_ridge"]:
                raise DpledgerError(f"adac-oful: estimate={prm['estimate']} reads every "
                                    "released episode and no noise_ridge; with memory=last "
                                    "or noise_ridge set estimate=ridge")
            sd = float(s_int) * L * 2.0 ** -bits if lattice else sigma
            noise_var = (sd / REWARD_SD) ** 2
            drawn.update(estimate=prm["estimate"], reward_sd=REWARD_SD)
        if whiten:
            drawn.update(noise_shape="data", kappa=prm["kappa"])
        return EpisodePlan(EP_REWARD, M, d, spec, (rel,), units,
                           _consts(prm["alpha"], prm["lambda"],
                                   shift_coef=prm["noise_ridge"] * sigma,
                                   growth=lg,
                                   last=prm["memory"] == "last", noise_var=noise_var,
                                   per_episode=prm["estimate"] == "episodes",
                                   kappa=prm["kappa"] if whiten else 0.0, bound=L), 0,
                           drawn, whiten)
