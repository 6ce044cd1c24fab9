"""dpledger.commands."""
