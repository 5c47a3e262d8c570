"""Rules about RAS (ncclras) output."""
