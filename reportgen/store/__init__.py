"""The store: run bundles on disk, listing runs, withdrawals; created once, never overwritten."""
