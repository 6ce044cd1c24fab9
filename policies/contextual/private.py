"""Private linear contextual policies (issue 22 §4): joint-DP LinUCB (Shariff & Sheffet 2018),
Mishra & Thakurta 2015's private contextual UCB and TS (reconstructed), and a reward-private
LinUCB (the setting of Neel & Roth 2018).

Each policy *describes* its releases — a tree over records (:mod:`dpledger.mechanisms.matrix`)
whose every node is one release per record it holds — and runs one compiled loop
(:func:`~dpledger.policies.contextual.private_loop.run_private`).  Every noise parameter is
computed by :mod:`dpledger.accounting.calibration` (the paper's σ and k, or σ and k solved with
dpledger's accountant) and by :mod:`dpledger.accounting.lattice` (the exact sampler's integer
σ's and their ρ); the policy only assembles them.  A record is the round's context and the
chosen arm's rescaled reward r ∈ [0, 1]; contexts have ‖x‖ ≤ L (the environment's declared
norm bound, refused above it, never clipped).

**Neighbours and the streams.**  Record-private policies (``jdp-linucb``, ``dp-linucb-mt``,
``dp-lints-mt``) run one tree over every delivered record (the ledger's stream 0) whose nodes
release one block per model: the model a record joins depends on its private context, so a
change of one record may move it from one arm's block to another's, and both blocks count in
its sensitivity (see :mod:`~dpledger.policies.contextual.private_loop`).  ``reward-dp-linucb``
runs one tree per stream: with public contexts the arm played is post-processing.

**Certificates.**  A record enters at most ``nodes`` = bit_length(max(T − D, 0)) nodes (the
tree's first record, in every level; ``levels`` ≥ nodes when the tree is padded to the paper's
m = 1 + ⌈log₂ T⌉), and each node is one release per tree record it writes; the certificate is
that composition, attained by observation 0 of stream 0.  ``--set counter=smooth``
(``jdp-linucb``, ``dp-linucb-mt``, ``dp-lints-mt``, ``reward-dp-linucb``) runs the smooth binary
mechanism instead (:mod:`dpledger.mechanisms.matrix_smooth`; one tree, or one per stream under
reward privacy): the first record's node count (:mod:`dpledger.accounting.smooth_tree`), one
ledger row per release of every released node.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from dpledger.accounting import theorems
from dpledger.accounting.calibration import (accounted_sigma, accounted_wishart,
                                             shariff_sheffet_sigma, shariff_sheffet_wishart)
from dpledger.accounting.certificate import Candidate, Certificate, Witness
from dpledger.accounting.composition import Composition
from dpledger.accounting.lattice import sym_matrix_lattice, vector_lattice
from dpledger.accounting.numerics import div_up, mul_up
from dpledger.accounting.smooth_tree import smooth_tree_candidate, smooth_worst_nodes
from dpledger.accounting.releases import (GaussianVectorRelease, LaplaceRelease,
                                          LaplaceVectorRelease, Release,
                                          SymmetricMatrixGaussianRelease, WishartRelease)
from dpledger.errors import DpledgerError
from dpledger.interrupt import stop_slot
from dpledger.mechanisms import matrix as mx
from dpledger.mechanisms.matrix_smooth import smooth_tree_bytes, smooth_tree_new
from dpledger.mechanisms.noise import lattice_release
from dpledger.mechanisms.smooth import (smooth_first_item_nodes, smooth_shape,
                                        smooth_shape_gaussian)
from dpledger.policies.base import Param, RunOutput
from dpledger.policies.contextual.base import ContextualPolicy, ContextualProblem, run_arrays
from dpledger.policies.contextual.linear import LAMBDA
from dpledger.policies.contextual.private_loop import (N_CONSTS, STAT_ENTRIES, STAT_JOINT,
                                                       STAT_REWARD, TS, UCB, C_KAPPA,
                                                       C_PSD_SCALE, C_REWARD_SD, C_SHIFT,
                                                       C_WIDTH, C_XI, run_private)

# the exact sampler's lattice bits default (noise.LATTICE_BITS is the K-armed reward lattice;
# here the entries of a record's statistic are rounded to 2^-16 of their range)
EXACT_LIMIT = 2.0 ** 50


@dataclass(frozen=True, eq=False)
class TreePlan:
    """What one run of a private policy draws and records, from its parameters and the
    problem: the tree (``n_trees`` of ``levels`` levels over ``blocks`` × ``entries`` numbers,
    padded or not), the noise law ``spec`` of a block, the interned ``releases``, the release
    index of each tree record a node writes (``record_rids``), a record's worst-case
    composition per node (``per_node``: (release index, count)), the lattice ``units`` (unit,
    unit of the reward entries, their inverses; 0 inverses for the float sampler), the model
    constants, ``drawn`` (the σ or k used, for run.json and the docs), and ``smooth`` — for
    ``counter=smooth`` the smooth tree's shape and bound (h, w, L), empty for the binary
    tree."""

    stat: int
    rule: int
    n_trees: int
    blocks: int
    entries: int
    levels: int
    pad: bool
    spec: tuple
    releases: tuple[Release, ...]
    record_rids: tuple[int, ...]
    per_node: tuple[tuple[int, int], ...]
    units: np.ndarray
    consts: np.ndarray
    lam: float
    drawn: dict = field(default_factory=dict)
    smooth: tuple[int, int, int] = ()   # counter=smooth: (h, w, the most records L)


def _float_units() -> np.ndarray:
    return np.array([1.0, 1.0, 0.0, 0.0])


def _lattice_units(unit: float, unit_r: float) -> np.ndarray:
    return np.array([unit, unit_r, 1.0 / unit, 1.0 / unit_r])


def _moves(problem: ContextualProblem) -> int:
    """Blocks one record's change can touch: two when it can move between per-arm blocks."""
    return 2 if (not problem.shared and problem.arms >= 2) else 1


def _consts(**kw) -> np.ndarray:
    c = np.zeros(N_CONSTS)
    for k, v in kw.items():
        c[{"shift": C_SHIFT, "psd_scale": C_PSD_SCALE, "xi": C_XI, "reward_sd": C_REWARD_SD,
           "kappa": C_KAPPA, "width": C_WIDTH}[k]] = v
    return c


def counter_param(binary: str, note: str = "") -> Param:
    """The ``counter`` parameter of a policy that can run its tree as the smooth binary
    mechanism (issue 32 §3); recorded in run.json only when set."""
    return Param("counter", "binary", "choice", f"the tree over the records: binary ({binary}) "
                 "or smooth (Andersson & Pagh 2023's smooth binary mechanism, reconstructed"
                 f"{note}: docs/algorithms.md#smooth-binary-counter)",
                 choices=("binary", "smooth"), omit_at_default=True)


class PrivateLinearPolicy(ContextualPolicy):
    """Common machinery: the plan (cached per problem), releases, certificate, one run."""

    private = True
    exact_sampler = True
    record_private = True
    privacy_model = "record-private"

    def __init__(self, **params):
        super().__init__(**params)
        self._plans: dict = {}
        self._capture_rows = 0          # tests: capture the first n node draws
        self._capture_clean = False     # white-box audits: with each node's clean p-sum

    def plan(self, problem: ContextualProblem) -> TreePlan:
        if problem not in self._plans:
            if problem.lattice_bits and problem.max_observations * 2.0 ** (
                    problem.lattice_bits + 1) >= EXACT_LIMIT:
                raise DpledgerError("too many records for exact lattice sums in float64; use a "
                                    "smaller --horizon")
            try:
                plan = self._make_plan(problem)
                # each release's normal form (its μ² or ε, exact) is what the ledger and the
                # certificate compute first: an ε such as 1e300 puts it past the floats
                Composition.of([(rel, 1) for rel in plan.releases])
            except OverflowError:
                given = ", ".join(f"{k}={self.params[k]!r}" for k in ("epsilon", "epsilon0",
                                                                      "delta")
                                  if k in self.params)
                raise DpledgerError(f"{self.name}: {given} put the noise's calibration beyond "
                                    "the range of floating point; use a smaller epsilon (or "
                                    "linucb, the non-private policy, for no privacy)") from None
            self._plans[problem] = plan
        return self._plans[problem]

    def _make_plan(self, problem: ContextualProblem) -> TreePlan:
        raise NotImplementedError

    def releases(self, problem: ContextualProblem) -> list[Release]:
        return list(self.plan(problem).releases)

    # counter=smooth: the shape rule of the node noise (the Laplace rule; Gaussian policies
    # override it), mechanisms/smooth.py
    smooth_shape_rule = staticmethod(smooth_shape)
    # what a smooth node's releases are, for the certificate's basis
    smooth_node_meaning = ""

    def smooth_shape(self, problem: ContextualProblem) -> tuple[int, int, int]:
        """counter=smooth: (h, w, L) — L the most records the tree holds, (h, w)
        ``smooth_shape_rule(L)``; () for the binary tree."""
        if self.params.get("counter") != "smooth":
            return ()
        L = max(problem.max_observations, 1)
        h, w = self.smooth_shape_rule(L)
        return h, w, L

    def nodes(self, problem: ContextualProblem) -> int:
        """The most nodes a record enters: bit_length of the most records a tree holds, or
        with counter=smooth the smooth tree's first record's count
        (:func:`~dpledger.accounting.smooth_tree.smooth_worst_nodes`)."""
        shape = self.smooth_shape(problem)
        if shape:
            return smooth_worst_nodes(problem.max_observations, shape[0], shape[1])
        return problem.max_observations.bit_length()

    def first_record_nodes(self, problem: ContextualProblem) -> list[tuple[int, int]]:
        """The nodes holding the first record, as (push, stop): released at push ``push``
        (1-based: the push's one node draw) over records [0, stop).  The binary tree's level-j
        node closes at push 2^j over [0, 2^j); the smooth tree's are replayed
        (:func:`~dpledger.mechanisms.smooth.smooth_first_item_nodes`).  White-box audits."""
        plan = self.plan(problem)
        if plan.smooth:
            h, w, _ = plan.smooth
            return smooth_first_item_nodes(problem.max_observations, h, w)
        return [(1 << j, 1 << j) for j in range(self.nodes(problem))]

    def certificate(self, problem: ContextualProblem) -> Certificate:
        plan = self.plan(problem)
        if plan.smooth:
            return self._smooth_certificate(problem, plan)
        nodes = self.nodes(problem)
        comp = Composition.of([(plan.releases[i], c * nodes) for i, c in plan.per_node]) \
            if nodes else Composition()
        online = problem.env != "replay"
        basis = (f"a record enters at most {nodes} tree nodes (bit length of the "
                 f"{problem.max_observations} records a tree can hold; its first record enters "
                 "one node per level), each node one release per tree record: "
                 + ", ".join(f"{c}× {plan.releases[i].kind}" for i, c in plan.per_node))
        return Certificate(candidates=(Candidate(comp, Witness(0, 0, 1 if online else None),
                                                 basis),), adaptive=False)

    def ledger_streams(self, problem: ContextualProblem) -> int:
        return 1 if self.record_private else problem.n_streams

    def stream_meaning(self, problem: ContextualProblem) -> str:
        if self.record_private:
            return ("one stream: every delivered record in delivery order (record privacy: "
                    "the arm a record joins depends on its own context, so the trees run over "
                    "all records)")
        return super().stream_meaning(problem)

    def _smooth_certificate(self, problem: ContextualProblem, plan: TreePlan) -> Certificate:
        """``counter=smooth``: the first record of the smooth tree lies in the most released
        nodes (:func:`~dpledger.accounting.smooth_tree.smooth_tree_candidate`), each node one
        release per tree record (``per_node``)."""
        h, w, L = plan.smooth
        online = problem.env != "replay"
        trees = ("one smooth tree over every delivered record (record privacy)"
                 if self.record_private else
                 f"one smooth tree per stream ({plan.n_trees} streams; reward privacy: a "
                 "stream's records are its model's; a tree holds at most "
                 f"{problem.max_observations} records)")
        cand = smooth_tree_candidate(
            problem.max_observations, h, w, [(plan.releases[i], c) for i, c in plan.per_node],
            Witness(0, 0, 1 if online else None),
            f"{trees}; every released node makes {self.smooth_node_meaning}")
        return Certificate(candidates=(cand,), adaptive=False,
                           note=f"counter = smooth (h = {h}, w = {w}, L = {L})")

    def model_bytes(self, problem: ContextualProblem) -> int:
        plan = self.plan(problem)
        d = problem.dim
        tree = (smooth_tree_bytes(plan.smooth[0], plan.blocks, plan.entries, plan.n_trees)
                if plan.smooth else 0)
        return (tree + mx.tree_bytes(plan.n_trees, plan.levels, plan.blocks, plan.entries)
                + 8 * problem.n_streams * (d * d + 3 * d) + 8 * (4 * d * d + plan.blocks
                                                                 * plan.entries))

    def row_capacity(self, problem: ContextualProblem) -> int:
        # counter=smooth: one row per release of the one node holding records each push makes
        # (every tree's pushes together: at most max_observations records in all)
        return (len(self.plan(problem).record_rids) * max(problem.max_observations, 1)
                if self.plan(problem).smooth else 1)

    def run_one(self, rng, env, problem: ContextualProblem) -> RunOutput:
        plan = self.plan(problem)
        T, d, M = problem.horizon, problem.dim, problem.n_streams
        # counter=smooth: the binary tree is a one-level stand-in of the same width (the loop
        # reads the statistic's width from it) and the smooth tree takes the records
        tr = mx.tree_new(plan.n_trees, 1 if plan.smooth else plan.levels, plan.blocks,
                         plan.entries, plan.record_rids)
        if plan.smooth:
            h, w, L = plan.smooth
            st = smooth_tree_new(h, w, max(L, 1), plan.blocks, plan.entries, plan.n_trees)
            rows = np.zeros((5, self.row_capacity(problem)), np.int64)
        else:
            st = smooth_tree_new(2, 1, 1, 1, 1)
            rows = np.zeros((5, 0), np.int64)
        rids = np.asarray(plan.record_rids, np.int64)
        p = int(plan.spec[5])
        A = np.zeros((max(p, 1), max(p, 1)))
        D = plan.blocks * plan.entries
        capture = np.zeros((self._capture_rows, 2 * D + 1 if self._capture_clean else D + 1))
        if plan.pad and not plan.smooth:
            for g in range(plan.n_trees):
                mx.tree_pad_init(tr, g, rng, plan.spec, A)
        chol = np.zeros((M, d, d))
        theta = np.zeros((M, d))
        widths = np.zeros(M)
        actions, regret, obs_stream, obs_round, info = run_arrays(T)
        rounds, n_obs, reward_sum, uniform_sum, n_rows = run_private(
            rng, env.as_kernel(), T, problem.shared, problem.delay, plan.rule, plan.stat, tr,
            plan.spec, plan.pad, A, capture, plan.units, plan.consts, plan.lam, chol, theta,
            widths, actions, regret, obs_stream, obs_round, info, stop_slot(), st,
            bool(plan.smooth), rows, rids)
        draws = int(st[3][0, 2]) if plan.smooth else int(tr[3][0, 2])
        out = RunOutput(actions=actions, rows=rows[:, :n_rows], noise_draws=draws, extra={
            "regret": regret, "obs_stream": obs_stream[:n_obs], "obs_round": obs_round[:n_obs],
            "rounds": int(rounds), "reward_sum": float(reward_sum),
            "uniform_sum": float(uniform_sum), "psd_repairs": int(info[0]),
            "refreshes": int(info[1])})
        if self._capture_rows:
            out.extra["noise"] = capture
        if not plan.smooth:
            out.trees = mx.tree_records(tr)
        return out


# -- Shariff & Sheffet 2018 -----------------------------------------------------------------------

@dataclass(frozen=True)
class Regulariser:
    """Shariff & Sheffet 2018's regularisation constants (their ``RegParams``): the shift added
    to the noisy Gram matrix and the bounds ρ_min ≤ eig(V − Gram) ≤ ρ_max, γ, that hold with
    probability 1 − α over the noise."""

    shift: float
    rho_min: float
    rho_max: float
    gamma: float


def gaussian_regulariser(sigma: float, m: int, d: int, log_inv_alpha: float) -> Regulariser:
    """Gaussian mode (their ``regparams(::GaussianMechanism)``): Υ = σ·√(2m)·(4√d +
    2·ln(1/α)), ρ_min = Υ, ρ_max = 3Υ, γ = √m·σ·(√d + √(2·ln(1/α)))/√Υ, shift 2Υ — m the
    noise matrices in a prefix, α the per-read failure probability."""
    ups = sigma * math.sqrt(2.0 * m) * (4.0 * math.sqrt(d) + 2.0 * log_inv_alpha)
    gamma = math.sqrt(m) * sigma * (math.sqrt(d) + math.sqrt(2.0 * log_inv_alpha)) / math.sqrt(ups)
    return Regulariser(shift=2.0 * ups, rho_min=ups, rho_max=3.0 * ups, gamma=gamma)


def wishart_regulariser(l_tilde2: float, k: int, m: int, d: int,
                        log_inv_alpha: float) -> Regulariser:
    """Wishart mode, shifted (their ``ShiftedWishart``): with Δ = √d + √(2(ln 4 + ln(1/α)))
    the unshifted bounds are ρ⁰_min = L̃²(√(mk) − Δ)², ρ⁰_max = L̃²(√(mk) + Δ)², γ⁰ =
    L̃(√d + √(2 ln(1/α))); the shifted ones ρ_min = 4L̃²·√(mk)·Δ, shift = ρ_min − ρ⁰_min
    (negative: most of the noise's mean m·k·L̃² is removed), ρ_max = ρ⁰_max + shift,
    γ = γ⁰·√(ρ⁰_min/ρ_min)."""
    root = math.sqrt(m * k)
    delta = math.sqrt(d) + math.sqrt(2.0 * (math.log(4.0) + log_inv_alpha))
    rmin0 = l_tilde2 * (root - delta) ** 2
    rmax0 = l_tilde2 * (root + delta) ** 2
    gamma0 = math.sqrt(l_tilde2) * (math.sqrt(d) + math.sqrt(2.0 * log_inv_alpha))
    rmin = 4.0 * l_tilde2 * root * delta
    shift = rmin - rmin0
    return Regulariser(shift=shift, rho_min=rmin, rho_max=rmax0 + shift,
                       gamma=gamma0 * math.sqrt(rmin0 / rmin))


class JdpLinUCB(PrivateLinearPolicy):
    """Joint-DP LinUCB: Shariff & Sheffet 2018 (NeurIPS), "Differentially Private Contextual
    Linear Bandits", §4 — formulas read from the authors' Julia code (PrivateBandits.jl,
    ``src/DifferentialPrivacy.jl``, ``src/LinearBandits.jl``); no code copied.

    One binary-mechanism tree over the records' (d+1)×(d+1) matrices [x; y][x; y]ᵀ (y the
    rescaled reward, ‖[x; y]‖² ≤ L̃² = L² + 1), padded so that every prefix carries m noise
    matrices (their pan-private accumulator), m = 1 + ⌈log₂ T⌉ (``calibration=paper``) or the
    bit length of max(T − D, 1) (``accounted``).  Node noise: ``mode=gaussian`` the symmetric
    Gaussian of σ, ``mode=wishart`` W_{d+1}(L̃²I, k).  The model reads V = the noisy Gram block
    + shift·I and u = the noisy Σ y·x, θ̂ = V⁻¹u, and plays argmax θ̂ᵀx + β‖x‖_{V⁻¹} with
    β = ξ + R·√max(0, ln det V + κ), ξ = S√ρ_max + γ, κ = 2(ln 2 + ln(1/α)) − d·ln ρ_min
    (their ``Ellipsoid``), α = 1/(2T), the regulariser's α/2^⌈log₂T⌉ (:func:`gaussian_
    regulariser`, :func:`wishart_regulariser`), R = 1/2 (rewards in [0, 1]: ½-sub-Gaussian),
    S = ``theta_bound``.

    ``calibration=paper``: their σ = √(16m)·L̃²·ln(4/δ)/ε, or their k (advanced composition
    over m nodes, Sheffet 2015's theorem per node).  ``calibration=accounted``: σ (or k) solved
    with dpledger's accountant so that the certificate — GDP composition of the nodes'
    symmetric Gaussians, μ_node = Δ_F/(√2σ) with Δ_F = ‖vvᵀ − wwᵀ‖_F ≤ √2·L̃²; or the optimal
    composition of the Wishart (ε, δ) statements — meets (ε, δ).  The ledger records the σ or
    k drawn.

    Reconstructed choices (docs/algorithms.md#jdp-linucb): disjoint per-arm models (contexts
    (T, d)) as one block per arm in every node (Gaussian: one Frobenius bound over both blocks
    a moved record touches; Wishart: two statements per node, so the paper's k is solved for
    2m); a failed Cholesky factorisation (probability ≤ α) is repaired by a larger shift
    (:func:`~dpledger.policies.contextual.private_loop.factor_psd`); the padding of the empty
    prefix (their code starts without noise).  The exact sampler (Gaussian mode): entries
    rounded to L̃²·2^-16, independent discrete Gaussians (:mod:`dpledger.accounting.lattice`).
    Ties uniformly at random.

    ``counter=smooth`` (reconstructed, Gaussian mode; docs/algorithms.md#jdp-linucb): the smooth
    binary mechanism (Andersson & Pagh 2023) over the whole statistic in place of the padded
    tree (:mod:`dpledger.mechanisms.matrix_smooth`): σ at the first record's node count, the
    regulariser at m = w, one ledger row per released node."""

    name = "jdp-linucb"
    title = "Joint-DP LinUCB (Shariff & Sheffet 2018)"
    provenance = "faithful to public implementations"
    rule = UCB
    params_spec = (
        Param("epsilon", 1.0, "positive", "privacy ε of the (ε, δ) target per record"),
        Param("delta", 0.1, "positive", "privacy δ of the (ε, δ) target, in (0, 1)"),
        Param("mode", "gaussian", "choice", "node noise: symmetric Gaussian or Wishart",
              choices=("gaussian", "wishart")),
        Param("calibration", "paper", "choice", "paper: Shariff & Sheffet's σ and k; "
              "accounted: solved with dpledger's accountant", choices=("paper", "accounted")),
        Param("theta_bound", 1.0, "positive", "S, the bound on ‖θ‖ in the confidence width"),
        counter_param("Shariff & Sheffet's padded binary mechanism", ", mode=gaussian"),
    )
    smooth_shape_rule = staticmethod(smooth_shape_gaussian)
    smooth_node_meaning = "one symmetric Gaussian of the whole (Gram, Σ r·x) statistic"

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params["delta"] < 1.0:
            raise DpledgerError(f"delta must lie in (0, 1), got {self.params['delta']!r}")
        if self.params["counter"] == "smooth":
            if self.params["mode"] != "gaussian":
                raise DpledgerError("jdp-linucb counter=smooth needs mode=gaussian: the shifted "
                                    "Wishart regulariser assumes exactly m noise matrices in "
                                    "every prefix, a smooth prefix holds w − z_t of them")
            self.provenance = "reconstructed"

    def theorem(self, problem: ContextualProblem):
        p = self.params
        return theorems.shariff_sheffet_2018_jdp_linucb(p["epsilon"], p["delta"], p["mode"],
                                                        p["calibration"], problem.shared)

    def _make_plan(self, problem: ContextualProblem) -> TreePlan:
        prm = self.params
        eps, delta, paper = prm["epsilon"], prm["delta"], prm["calibration"] == "paper"
        d, p, M, bits = problem.dim, problem.dim + 1, problem.n_streams, problem.lattice_bits
        L = problem.norm_bound
        lt2 = L * L + 1.0
        lt = math.sqrt(lt2)
        n = problem.horizon
        nodes = max(self.nodes(problem), 1)
        m_paper = 1 + (n - 1).bit_length()
        levels = m_paper if paper else nodes
        smooth = self.smooth_shape(problem)
        if smooth:
            # the paper's σ at m = the nodes a record enters; the regulariser at m = w, the
            # most noise matrices a smooth prefix holds (mechanisms/matrix_smooth.py)
            m_paper = nodes
            levels = smooth[1]
        E = mx.packed_size(p)
        log_inv_alpha = math.log(2.0 * n * (1 << (n - 1).bit_length()))   # α/H, α = 1/(2n)
        units = _float_units()
        if prm["mode"] == "gaussian":
            frob = math.sqrt(2.0) * lt2
            if bits:
                def make(s):
                    return sym_matrix_lattice(s, frob, lt2, p, bits, _moves(problem))[2]
            else:
                def make(s):
                    return SymmetricMatrixGaussianRelease(sigma=s, sensitivity=frob, dim=p,
                                                          blocks=M)
            sigma = (shariff_sheffet_sigma(eps, delta, m_paper, lt) if paper
                     else accounted_sigma(make, nodes, eps, delta))
            if bits:
                s_off, s_diag, rel = sym_matrix_lattice(sigma, frob, lt2, p, bits,
                                                        _moves(problem))
                scales = np.where(mx.diagonal_mask(p), s_diag, s_off)
                spec = mx.noise_spec(mx.DGAUSS, entries=E, iscales=scales, p=p)
                units = _lattice_units(lt2 * 2.0 ** -bits, lt2 * 2.0 ** -bits)
                drawn = {"sigma": sigma, "lattice_sigma": [int(s_off), int(s_diag)]}
            else:
                rel = make(sigma)
                spec = mx.noise_spec(mx.GAUSS_SYM, entries=E, sigma=sigma, p=p)
                drawn = {"sigma": sigma}
            reg = gaussian_regulariser(sigma, levels, d, log_inv_alpha)
            records = (0,)
        else:
            if bits:
                raise DpledgerError("jdp-linucb mode=wishart has no exact-sampler form (the "
                                    "exact sampler draws discrete Laplace and discrete Gaussian "
                                    "noise); use mode=gaussian or --sampler float")
            mv = _moves(problem)
            k, d_node = (shariff_sheffet_wishart(eps, delta, m_paper * mv, p) if paper
                         else accounted_wishart(eps, delta, nodes * mv, p, lt))
            rel = WishartRelease(dim=p, k=k, bound=lt, delta=d_node)
            spec = mx.noise_spec(mx.WISHART, entries=E, sigma=lt2, k=k, p=p)
            reg = wishart_regulariser(lt2, k, levels, d, log_inv_alpha)
            records = (0,) * mv
            drawn = {"k": k, "delta_per_node": d_node}
        kappa = 2.0 * (math.log(2.0) + math.log(2.0 * n)) - d * math.log(reg.rho_min)
        xi = prm["theta_bound"] * math.sqrt(reg.rho_max) + reg.gamma
        drawn.update(levels=levels, shift=reg.shift, rho_min=reg.rho_min, rho_max=reg.rho_max,
                     gamma=reg.gamma)
        if smooth:
            drawn.update(counter="smooth", h=smooth[0], w=smooth[1], nodes=nodes)
        return TreePlan(STAT_JOINT, self.rule, 1, M, E, levels, not smooth, spec, (rel,),
                        records, ((0, len(records)),), units,
                        _consts(shift=reg.shift, psd_scale=reg.rho_min, xi=xi, reward_sd=0.5,
                                kappa=kappa), 0.0, drawn, smooth)


# -- Mishra & Thakurta 2015, reconstructed --------------------------------------------------------

class _MishraThakurtaContextual(PrivateLinearPolicy):
    """Mishra & Thakurta 2015 (UAI) §5.1: LinUCB / linear TS whose statistics are read only
    through tree-based aggregation, ε₀ per released parameter — RECONSTRUCTED (their Appendix
    D.2/D.3 is not available; Shariff & Sheffet 2018 describe them as "similar to our own …
    without maintaining PSD").

    Our reading (docs/algorithms.md#dp-linucb-mt): the d(d+1)/2 distinct entries of
    the Gram matrix Σ x xᵀ and the d entries of Σ r·x are each released through their own
    binary-mechanism tree (Chan, Shi & Song 2011, as the K-armed DP-UCB: levels = bit length of
    max(T − D, 1), each node Lap(levels·Δ₁/ε₀)), so a record costs ε₀ per statistic —
    (d(d+1)/2 + d)·ε₀ in all, 27 × 0.1 = 2.7 at d = 6, the paper's total.  Choices that are
    ours: (1) replace-one sensitivities with ‖x‖ ≤ L and r ∈ [0, 1]: a diagonal entry x_i² ∈
    [0, L²], an off-diagonal x_i x_j ∈ [−L²/2, L²/2], r·x_i ∈ [−L, L]; with disjoint models each
    node releases a statistic's K-vector over the arms (a record may move between two arms'
    blocks), L1 sensitivity Δ₁ = 2L² (diagonal, K ≥ 2) or L² (diagonal, one model), L²
    (off-diagonal), 2L (Σ r·x); (2) the trees run over every record (record privacy, module
    docstring); (3) V = λ·I + the noisy Gram matrix, made positive definite when it is not by
    the smallest added λ·2^j that lets a Cholesky factorisation succeed
    (:func:`~dpledger.policies.contextual.private_loop.factor_psd`).  The exact sampler:
    entries rounded to the lattice (L²·2^-16 for the Gram entries, 2L·2^-16 for Σ r·x), discrete
    Laplace noise of the same ε per node.  ``counter=smooth`` (reconstructed,
docs/algorithms.md#dp-linucb-mt): the smooth tree over the same entries, shape ``smooth_shape``
(the Laplace rule), each entry Lap(nodes·Δ₁/ε₀) with nodes the smooth tree's first-record
count, so the total is unchanged.  Ties uniformly at random."""

    provenance = "reconstructed"
    statistic_variant = ""
    smooth_node_meaning = ("one Laplace release per distinct entry of (Gram, Σ r·x), each at "
                           "scale nodes·Δ₁/ε₀")

    def theorem(self, problem: ContextualProblem):
        d = problem.dim
        thm = theorems.mishra_thakurta_2015_contextual(self.params["epsilon0"],
                                                       d * (d + 1) // 2 + d,
                                                       self.statistic_variant)
        if self.params["counter"] != "smooth":
            return thm
        # the paper's statement is basic composition of ε₀-DP trees, one per statistic; its
        # trees are binary.  A smooth tree whose record lies in ``nodes`` released nodes of
        # Lap(nodes·Δ₁/ε₀) is ε₀-DP as well (the same composition), so the total is the
        # same number — but that step is ours, not the paper's: said in the notes.
        return dataclasses.replace(thm, notes=thm.notes + (
            "counter=smooth: the paper's trees are binary; each statistic's smooth tree "
            "(Andersson & Pagh 2023, reconstructed) is ε₀-DP by our own count of the nodes a "
            "record enters (docs/algorithms.md#smooth-binary-counter), and the total is the "
            "same basic composition",))

    def _make_plan(self, problem: ContextualProblem) -> TreePlan:
        eps0 = self.params["epsilon0"]
        d, M, bits, L = problem.dim, problem.n_streams, problem.lattice_bits, problem.norm_bound
        mv = _moves(problem)
        levels = max(self.nodes(problem), 1)
        gram = d * (d + 1) // 2
        E = gram + d
        diag = mx.diagonal_mask(d)
        # statistic kinds: 0 diagonal Gram entry, 1 off-diagonal, 2 an entry of Σ r·x
        kind_of = np.r_[np.where(diag, 0, 1), np.full(d, 2)].astype(np.int64)
        sens = (L * L * mv, L * L, 2.0 * L)
        if bits:
            lat_bits = (bits + (mv - 1), bits, bits)
            ratio = div_up(levels, eps0)                # levels/ε₀, rounded up
            rels = tuple(lattice_release(LaplaceRelease(scale=ratio, sensitivity=1.0), b)
                         for b in lat_bits)
            tn = np.array([int(round(r.scale * mx.LAPLACE_DEN)) for r in rels], dtype=np.int64)
            spec = mx.noise_spec(mx.DLAPLACE, entries=E, iscales=tn[kind_of])
            units = _lattice_units(L * L * 2.0 ** -bits, 2.0 * L * 2.0 ** -bits)
        else:
            scales = tuple(div_up(mul_up(levels, s), eps0) for s in sens)
            rels = tuple(LaplaceVectorRelease(scale=b, sensitivity=s, dim=M)
                         for b, s in zip(scales, sens, strict=True))
            spec = mx.noise_spec(mx.LAPLACE, entries=E, scales=np.array(scales)[kind_of])
            units = _float_units()
        counts = np.bincount(kind_of, minlength=3)
        per_node = tuple((i, int(c)) for i, c in enumerate(counts) if c)
        lam = self.params["lambda"]
        drawn = {"levels": levels, "statistics": E, "scales": [r.scale for r in rels]}
        smooth = self.smooth_shape(problem)
        if smooth:
            drawn.update(counter="smooth", h=smooth[0], w=smooth[1], nodes=levels)
        return TreePlan(STAT_ENTRIES, self.rule, 1, M, E, levels, False, spec, rels,
                        tuple(int(x) for x in kind_of), per_node, units,
                        _consts(shift=lam, psd_scale=lam, width=self.params[self.width_param]),
                        lam, drawn, smooth)


EPSILON0 = Param("epsilon0", 0.1, "positive", "ε₀ per released statistic (each Gram entry and "
                 "each entry of Σ r·x)")
MT_COUNTER = counter_param("Chan, Shi & Song's binary mechanism, one Lap(levels·Δ₁/ε₀) per "
                           "entry and node", ", one Lap(nodes·Δ₁/ε₀) per entry and node")


class DpLinUcbMT(_MishraThakurtaContextual):
    __doc__ = ("Private contextual UCB, Mishra & Thakurta 2015 (LinUCB, Li et al. 2010) — "
               + _MishraThakurtaContextual.__doc__)
    name = "dp-linucb-mt"
    title = "Private contextual UCB (Mishra & Thakurta 2015, reconstructed)"
    rule = UCB
    width_param = "alpha"
    statistic_variant = "private contextual UCB"
    params_spec = (EPSILON0, Param("alpha", 1.0, "positive", "confidence width α: "
                                   "θ̂ᵀx + α·√(xᵀV⁻¹x)"), LAMBDA, MT_COUNTER)


class DpLinTsMT(_MishraThakurtaContextual):
    __doc__ = ("Private contextual Thompson sampling, Mishra & Thakurta 2015 (linear TS, "
               "Agrawal & Goyal 2013: θ̃ ~ N(θ̂, v²V⁻¹)) — " + _MishraThakurtaContextual.__doc__)
    name = "dp-lints-mt"
    title = "Private contextual Thompson sampling (Mishra & Thakurta 2015, reconstructed)"
    rule = TS
    width_param = "v"
    statistic_variant = "private contextual Thompson sampling"
    params_spec = (EPSILON0, Param("v", 1.0, "positive", "posterior scale v: θ̃ ~ N(θ̂, "
                                   "v²·V⁻¹)"), LAMBDA, MT_COUNTER)


# -- reward-private LinUCB ------------------------------------------------------------------------

class RewardDpLinUCB(PrivateLinearPolicy):
    """Reward-private LinUCB in the setting of Neel & Roth 2018 (ICML, "Mitigating Bias in
    Adaptive Data Gathering via Differential Privacy": contexts public, rewards private) — our
    construction (reconstructed): the Gram matrix A = λ·I + Σ x xᵀ is exact (rank-1 Cholesky
    updates, as :class:`~dpledger.policies.contextual.linear.LinUCB`); Σ r·x is released through
    one Gaussian binary-mechanism tree per stream (per arm for disjoint models, one for a shared
    θ: the arm played is a function of public contexts and released values, so each arm's
    records form a stream), σ solved with dpledger's accountant (GDP, exact for Gaussians) so
    that a reward's ``nodes`` node releases — L2 sensitivity L: |r − r′|·‖x‖ ≤ L — meet
    (ε, δ).  θ̂ = A⁻¹·(noisy Σ r·x); index θ̂ᵀx + α‖x‖_{A⁻¹}.  The exact sampler: entries of
    r·x rounded to L·2^-16, independent discrete Gaussians (:mod:`dpledger.accounting.lattice`).
    Ties uniformly at random.

    ``counter=smooth`` (reconstructed, float or exact sampler; docs/algorithms.md#reward-dp-linucb):
    each stream's tree is the smooth binary mechanism (Andersson & Pagh 2023,
    :mod:`dpledger.mechanisms.matrix_smooth`, one tree per stream), shape
    ``smooth_shape_gaussian`` (as ``jdp-linucb``'s: the node law is Gaussian), σ solved at the
    first reward's smooth node count; one ledger row per released node over its exact record
    range, so each reward's total is exact."""

    name = "reward-dp-linucb"
    title = "Reward-private LinUCB (Neel & Roth 2018's setting)"
    provenance = "reconstructed"
    record_private = False
    privacy_model = "reward-private"
    rule = UCB
    params_spec = (
        Param("epsilon", 1.0, "positive", "privacy ε of the (ε, δ) target per reward"),
        Param("delta", 0.1, "positive", "privacy δ of the (ε, δ) target, in (0, 1)"),
        Param("alpha", 1.0, "positive", "confidence width α: θ̂ᵀx + α·√(xᵀA⁻¹x)"),
        LAMBDA,
        counter_param("one Gaussian binary-mechanism tree per stream",
                      ", one Gaussian tree per stream"),
    )
    smooth_shape_rule = staticmethod(smooth_shape_gaussian)
    smooth_node_meaning = "one Gaussian vector release of Σ r·x (d entries, L2 sensitivity L)"

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params["delta"] < 1.0:
            raise DpledgerError(f"delta must lie in (0, 1), got {self.params['delta']!r}")

    def theorem(self, problem: ContextualProblem):
        thm = theorems.reward_private_linucb(self.params["epsilon"], self.params["delta"])
        if self.params["counter"] != "smooth":
            return thm
        return dataclasses.replace(thm, notes=thm.notes + (
            "counter=smooth: each stream's tree is the smooth binary mechanism (Andersson & "
            "Pagh 2023, reconstructed); σ is solved at the first reward's count of released "
            "nodes (docs/algorithms.md#smooth-binary-counter)",))

    def _make_plan(self, problem: ContextualProblem) -> TreePlan:
        eps, delta = self.params["epsilon"], self.params["delta"]
        d, M, bits, L = problem.dim, problem.n_streams, problem.lattice_bits, problem.norm_bound
        nodes = max(self.nodes(problem), 1)
        if bits:
            def make(s):
                return vector_lattice(s, L, L, d, bits)[1]
        else:
            def make(s):
                return GaussianVectorRelease(sigma=s, sensitivity=L, dim=d)
        sigma = accounted_sigma(make, nodes, eps, delta)
        if bits:
            s_int, rel = vector_lattice(sigma, L, L, d, bits)
            spec = mx.noise_spec(mx.DGAUSS, entries=d, iscales=np.full(d, s_int))
            units = _lattice_units(L * 2.0 ** -bits, L * 2.0 ** -bits)
            drawn = {"sigma": sigma, "lattice_sigma": int(s_int)}
        else:
            rel = make(sigma)
            spec = mx.noise_spec(mx.GAUSS_VEC, entries=d, sigma=sigma)
            units = _float_units()
            drawn = {"sigma": sigma}
        lam = self.params["lambda"]
        drawn["levels"] = nodes
        smooth = self.smooth_shape(problem)
        if smooth:
            drawn.update(counter="smooth", h=smooth[0], w=smooth[1], nodes=nodes)
        return TreePlan(STAT_REWARD, self.rule, M, 1, d, nodes, False, spec, (rel,), (0,),
                        ((0, 1),), units, _consts(width=self.params["alpha"]), lam, drawn,
                        smooth)
