"""Rules about InfiniBand/RoCE verbs: completion and async errors, failed verbs calls, GPUDirect RDMA."""
