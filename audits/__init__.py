"""dpledger.audits: neighbouring-stream audits with statistically valid lower bounds
(docs/design.md#audits).

* :mod:`.stats` — one-sided Clopper–Pearson bounds, the ε (KOV, δ ≥ 0) and μ (GDP) lower
  bounds, the selection split (docs/audits.md);
* :mod:`.pairs` — neighbouring reward tables: the default pair (witness row t*, low → high end
  for every arm) over a documented adversarial table per policy, or the user's own pair;
* :mod:`.policy` — white-box (captured witness release) and black-box (actions only) audits of
  whole policies, a compiled trial loop over the policy's numba kernel;
* :mod:`.mechanisms` — white-box audits of Laplace and Gaussian mechanisms (float and exact
  samplers) and the floating-point attack of Mironov (2012);
* :mod:`.vector_releases` — the vector, symmetric-matrix, per-entry Laplace and Wishart
  releases drawn by the private contextual policies' compiled samplers, their worst-case
  changes, and the Wishart pair's exact privacy profile (χ² tails);
* :mod:`.contextual` — white-box and black-box audits of the private contextual policies on a
  neighbouring pair of contextual tables (differing in one record), with computed limits;
* :mod:`.one_run` — one-run audits with canaries (Steinke, Nasr & Jagielski 2023), and
  :mod:`.one_run_contextual` for jdp-linucb's canary records;
* :mod:`.betting` — the sequential audit by betting (a test supermartingale, ``--sequential``);
* :mod:`.result` — the result record and ``audit.json``.

An audit can only refute a certificate, never certify one: a lower bound above the certificate is a
bug, in the code or the theorem.
"""
from dpledger.audits.contextual import audit_contextual
from dpledger.audits.mechanisms import audit_gaussian, audit_laplace
from dpledger.audits.pairs import NeighbourPair, default_pair
from dpledger.audits.policy import audit_policy
from dpledger.audits.result import AuditResult
from dpledger.audits.stats import audit_scores, bounds_from_counts, cp_lower, cp_upper

__all__ = ["audit_policy", "audit_contextual", "audit_laplace", "audit_gaussian", "audit_scores",
           "bounds_from_counts", "cp_lower", "cp_upper", "NeighbourPair", "default_pair",
           "AuditResult"]
