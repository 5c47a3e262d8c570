"""Rules about NCCL Inspector traces."""
