"""dpledger.policies."""
