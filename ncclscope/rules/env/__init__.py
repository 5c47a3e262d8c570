"""Rules about NCCL settings: overrides and settings that differ across ranks."""
