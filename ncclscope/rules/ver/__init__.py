"""Rules about versions: NCCL, CUDA, the driver, across ranks."""
