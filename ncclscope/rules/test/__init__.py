"""Rules about nccl-tests output."""
