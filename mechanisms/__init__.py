"""dpledger.mechanisms: noise samplers, Laplace/Gaussian releases and continual counters.

* :mod:`.samplers` — the ``Sampler`` interface: ``FloatSampler`` (numpy Generator, simulation)
  and ``ExactSampler`` (lattice 2^-k, CKS20 discrete Laplace/Gaussian, deployment).
* :mod:`.exact` — the exact CKS20 samplers over a bit source (numpy Generator or ``secrets``).
* :mod:`.noise` — draw noise and write its ledger row in one call (compiled and Python).
* :mod:`.basic` — noisy sums, means and declared-sensitivity statistics.
* :mod:`.counters` — binary, logarithmic and hybrid continual counters (Chan–Shi–Song 2011)
  as ``@njit`` state-update functions with Python wrappers.

Mechanisms describe releases (touch range, sensitivity, noise); per-reward privacy totals come
only from :mod:`dpledger.accounting`.
"""
from dpledger.mechanisms.basic import NoisyStatistic, noisy_mean, noisy_sum, release_value
from dpledger.mechanisms.counters import (BinaryCounter, HybridCounter, LogarithmicCounter,
                                          binary_levels)
from dpledger.mechanisms.noise import draw_and_record
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler, Sampler, make_sampler

__all__ = ["BinaryCounter", "ExactSampler", "FloatSampler", "HybridCounter", "LogarithmicCounter",
           "NoisyStatistic", "Sampler", "binary_levels", "draw_and_record", "make_sampler",
           "noisy_mean", "noisy_sum", "release_value"]
