"""dpledger.policies.

``online(name, n_arms, …)``: a registered policy in step form on a live ledger store
(:mod:`dpledger.policies.step`).
"""


def online(name, n_arms, horizon=None, **kwargs):
    """Policy ``name`` in step form: see :func:`dpledger.policies.step.online`."""
    from dpledger.policies.step import online as _online
    return _online(name, n_arms, horizon, **kwargs)
