"""dpledger.audits."""
