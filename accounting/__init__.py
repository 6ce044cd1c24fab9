"""dpledger.accounting."""
