"""Rules that pass on NCCL's own hints."""
