"""The PLD accountant's content-keyed cache (accounting/pld_cache.py): on only inside
``enabled()`` (``dpledger run``), a hit is the computed double bit for bit and a skip the same
reason, and the key separates δ and compositions."""
from __future__ import annotations

import pytest

from dpledger.accounting import pld, pld_cache
from dpledger.accounting.composition import Composition
from dpledger.accounting.releases import GaussianRelease, LaplaceRelease


def _comp(count: int = 3) -> Composition:
    return Composition.of([(LaplaceRelease(scale=2.0, sensitivity=1.0), count),
                           (LaplaceRelease(scale=4.0, sensitivity=1.0), 1)])


def test_hits_are_the_computed_double(tmp_path, monkeypatch):
    monkeypatch.setenv("DPLEDGER_PLD_CACHE", str(tmp_path))
    comp = _comp()
    fresh = pld.pld_epsilon(comp, 1e-6)
    assert not list(tmp_path.iterdir())                 # off outside enabled()
    with pld_cache.enabled():
        first = pld.pld_epsilon(comp, 1e-6)
        assert len(list(tmp_path.iterdir())) == 1
        calls = []
        hit = pld_cache.remembered("pld_epsilon", comp, 1e-6, lambda: calls.append(1) or -1.0,
                                   pld.PldSkipped)
        other_delta = pld.pld_epsilon(comp, 1e-5)
        other_comp = pld.pld_epsilon(_comp(4), 1e-6)
    assert first == fresh and hit == fresh and not calls     # stored, read, not recomputed
    assert other_delta == pld.pld_epsilon(comp, 1e-5) != fresh
    assert other_comp == pld.pld_epsilon(_comp(4), 1e-6) != fresh
    assert len(list(tmp_path.iterdir())) == 3


def test_skips_are_remembered_with_their_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("DPLEDGER_PLD_CACHE", str(tmp_path))
    comp = Composition.of([(GaussianRelease(sigma=1.0, sensitivity=1.0), 2), (_comp().items[0])])

    def skip():
        raise pld.PldSkipped("too-wide")
    with pld_cache.enabled():
        for _ in range(2):
            with pytest.raises(pld.PldSkipped, match="too-wide"):
                pld_cache.remembered("t", comp, 1e-6, skip, pld.PldSkipped)
        with pytest.raises(pld.PldSkipped, match="too-wide"):      # a hit: not recomputed
            pld_cache.remembered("t", comp, 1e-6, lambda: 1.0, pld.PldSkipped)
    monkeypatch.setenv("DPLEDGER_PLD_CACHE", "off")
    with pld_cache.enabled():
        assert pld_cache.remembered("t", comp, 1e-6, lambda: 1.5, pld.PldSkipped) == 1.5
