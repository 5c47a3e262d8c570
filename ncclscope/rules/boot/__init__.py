"""Rules about the bootstrap: the job that never formed."""
