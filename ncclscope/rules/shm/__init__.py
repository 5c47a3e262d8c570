"""Rules about the shared-memory transport: /dev/shm, cuMem host memory."""
