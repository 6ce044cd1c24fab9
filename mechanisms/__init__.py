"""dpledger.mechanisms."""
