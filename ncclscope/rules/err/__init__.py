"""Rules about errors NCCL reported: CUDA failures, out of memory, remote errors, the first error."""
