"""Rules about hangs, timeouts, slow init and jobs killed while in NCCL."""
