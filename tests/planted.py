"""Test-only mis-noised policies (issue 12 §1): planted defects for the per-draw test and audits.

No public path builds these: they live under tests/ (not in any ``dpledger`` package, so
``import dpledger`` never defines them), are never passed to ``register_policy``, and no
parameter of a registered policy makes its kernel draw anything but the scales of its declared
releases (``KernelPolicy.noise_scales``).  Each one subclasses a registered policy and overrides
only ``noise_scales`` — the scales its kernel draws — so it declares the parent's releases,
certificate and theorem while drawing other noise; the tests must catch that:

* :class:`PlantedHalfNoiseLazyDPTS` declares Lazy-DP-TS's Lap(1/ε) and draws Lap(0.5/ε) (its
  true pure ε is 2ε);
* :func:`noiseless` draws no noise at all (scale 0: ``Generator.laplace(0, 0)`` is 0) — the
  black-box power checks' "noise switched off" policy, formerly ``--set noise=0``.
"""
from __future__ import annotations

import numpy as np

from dpledger.policies.hu2025 import DPTSUCB
from dpledger.policies.hu_hegde import LazyDPTS
from dpledger.policies.registry import policy_class


class PlantedHalfNoiseLazyDPTS(LazyDPTS):
    """Lazy-DP-TS whose kernel draws Lap(0.5/ε) where its releases (and so its ledger rows and
    certificate) declare Lap(1/ε): the planted defect.  The index shift keeps ε."""

    name = "planted-half-noise-lazy-dp-ts"
    title = "PLANTED DEFECT (tests only): Lazy-DP-TS drawing half its declared noise scale"

    def noise_scales(self, T, K):
        return 0.5 * super().noise_scales(T, K)


def noiseless_class(name: str) -> type:
    """Registered policy ``name``'s class with its noise drawn at scale 0 (its declared
    releases unchanged).  It keeps the parent's ``name`` because audit designs are chosen by
    name (``audits.pairs.DESIGNS``); the class is built here, so the registry never returns it."""
    base = policy_class(name)

    def noise_scales(self, T, K):
        return np.zeros_like(base.noise_scales(self, T, K))

    return type(f"Noiseless{base.__name__}", (base,), {
        "noise_scales": noise_scales,
        "__doc__": f"PLANTED DEFECT (tests only): {name} drawing no noise",
        "__module__": __name__})


def noiseless(name: str, **params):
    """An instance of :func:`noiseless_class` ``(name)``."""
    return noiseless_class(name)(**params)


class PlantedHalfSigmaDPTSUCB(DPTSUCB):
    """DP-TS-UCB whose kernel draws its fresh samples with half the declared σ (variance scale
    ln(T)^α / 4 in the kernel, ln(T)^α in its releases and certificate): a Gaussian policy with
    a wrong σ, the planted defect of the GDP sequential audit (true μ = 2 × the certificate's)."""

    name = "dp-ts-ucb"        # audit designs (pairs.WHITEBOX_CONFIGS) are chosen by name
    title = "PLANTED DEFECT (tests only): DP-TS-UCB drawing half its declared sigma"

    def kernel_params(self, T, K):
        p = super().kernel_params(T, K).copy()
        p[0] = p[0] / 4.0
        return p
