"""Rules about the topology NCCL detected (log lines and topology XML)."""
