"""Contextual bandits: environments (synthetic linear, full-information tables, classification
data, logged data by replay), reward delays, the non-private LinUCB and linear TS, and the
contextual simulator.  See :mod:`~dpledger.policies.contextual.base` for how a policy records
its releases (records keyed (run, stream, observation))."""
